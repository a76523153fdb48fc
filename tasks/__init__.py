"""Fine-tuning tasks: classification processors and metrics (SQuAD later)."""
