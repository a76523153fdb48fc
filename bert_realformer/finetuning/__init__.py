"""Fine-tuning: the one flow every task runs through, its contract, schedule and hooks."""
