"""What the command-line scripts share, and only they use: the runner every script ends
through (`runner`: one `error:` line for a user mistake) and the flags, checks and wiring of
the training scripts (`training_flags`). The top of the layering, below the scripts."""
