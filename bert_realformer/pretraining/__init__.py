"""Pretraining: instance creation (as the original `create_pretraining_data.py`), the TFRecord
schema, and (for `run_pretraining.py`) the input pipeline."""
