"""Training: the original optimizer (AdamW without bias correction), LAMB, the learning-rate
schedule, and the distributed custom training loop used by the scripts."""
