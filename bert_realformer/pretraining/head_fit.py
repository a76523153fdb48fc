"""A released checkpoint without its MLM head, fitted one before it is continued.

Sentence-Transformers models (all-MiniLM-L6-v2) and some releases ship the encoder alone. Continued
pretraining from one starts with a random `cls/predictions` head: its held-out MLM accuracy is 0 at
step 0, and the encoder adapts to the head's random predictions while the head learns. So
`run_pretraining.py` first fits the head alone on the frozen encoder (the `--train_heads_only`
procedure, `modeling.freeze_encoder`) into OUTPUT_DIR/head_fit/, then continues from there: the
step-0 point is the released encoder with a head that means something. A run again finds the fit
done (or resumes it) and goes on.

    if lacks_mlm_head(init_checkpoint) and not resuming(output_dir):
        init_checkpoint = <train heads only, HEAD_FIT_LEARNING_RATE, into head_fit_dir(output_dir)>
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_realformer import storage
from bert_realformer.checkpoints import training_states

MLM_HEAD = "cls/predictions/output_bias"  # (a checkpoint with the head holds it; without, none of cls/predictions)
HEAD_FIT_LEARNING_RATE = 1e-3  # (a head from scratch on a frozen encoder: STUDY.md's head fit)
HEAD_FIT_DIRECTORY = "head_fit"


def lacks_mlm_head(init_checkpoint: str) -> bool:
    """Whether the weights at `init_checkpoint` (any form the scripts read) hold no MLM head."""
    from bert_realformer.checkpoints.pretrained import read_pretrained
    found = training_states.resolve(init_checkpoint)
    if found.weight_format is None:  # (a TF1 prefix or a training state: its index alone)
        return MLM_HEAD not in training_states.stored_weight_shapes(found)
    return MLM_HEAD not in read_pretrained(init_checkpoint).values


def head_fit_dir(output_dir: str) -> str:
    return os.path.join(output_dir, HEAD_FIT_DIRECTORY)


def resuming(output_dir: str) -> bool:
    """Whether a run in `output_dir` goes on from its own training state (its head long fitted)."""
    state_dir = os.path.join(output_dir, training_states.TRAINING_STATE)
    return storage.isdir(state_dir) and tf.train.latest_checkpoint(state_dir) is not None


def fitted(output_dir: str, steps: int) -> str | None:
    """The head fit's `model.ckpt-STEPS` in `output_dir`, once it has finished (else None)."""
    prefix = os.path.join(head_fit_dir(output_dir), f"model.ckpt-{steps}")
    return prefix if storage.exists(prefix + ".index") else None
