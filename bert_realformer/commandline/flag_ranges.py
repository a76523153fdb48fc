"""The range of every numeric flag of every script, checked by absl as it parses the command
line: a value no one means (a negative learning rate, zero epochs, a warm-up proportion of 2, nan
or inf) ends
the script before any work as `error: flag --NAME=VALUE: must be ...` (exit 2).

One table for all scripts, by flag name (a name means the same thing in every script). A numeric
flag missing from it is refused when the script starts (`register`), so a new flag cannot go
unchecked; `ANY` marks the flags where every value means something.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Collection, Mapping

from absl import flags


@dataclasses.dataclass(frozen=True)
class Range:
    """Values from `low` to `high` (None: unbounded); `low_open`, `high_open`: that end itself excluded."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value) -> bool:
        if value is None:  # (a flag without a default, not given)
            return True
        if not math.isfinite(value):  # (nan and inf parse as floats; no one means them)
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        if self.high is None:
            return f"must be greater than {self.low:g}" if self.low_open else f"must be at least {self.low:g}"
        return f"must be in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"

    def outside(self, integer: bool) -> list:
        """Values just outside the range (what the tests try)."""
        values = []
        if self.low is not None:
            values.append(self.low if self.low_open else self.low - 1)
        if self.high is not None:
            values.append(self.high if self.high_open else self.high + (1 if integer else 0.5))
        return [int(v) if integer else float(v) for v in values]


ANY = None
POSITIVE = Range(1)        # counts and sizes
NON_NEGATIVE = Range(0)    # steps that may be none, patience, restarts
PROBABILITY = Range(0, 1)
SHARE = Range(0, 1, low_open=True)

RANGES: Mapping[str, Range | None] = types.MappingProxyType({
    # batches, lengths, counts
    "train_batch_size": POSITIVE, "eval_batch_size": POSITIVE, "predict_batch_size": POSITIVE,
    "batch_size": POSITIVE, "max_seq_length": POSITIVE, "max_predictions_per_seq": POSITIVE,
    "max_query_length": POSITIVE, "max_answer_length": POSITIVE, "doc_stride": POSITIVE,
    "n_best_size": POSITIVE, "max_windows_per_document": POSITIVE, "num_tpu_cores": POSITIVE,
    "max_eval_steps": POSITIVE, "max_examples": POSITIVE, "attention_examples": POSITIVE,
    "dupe_factor": POSITIVE, "held_out_articles": POSITIVE, "max_texts": NON_NEGATIVE,
    "max_train_examples": NON_NEGATIVE, "num_workers": POSITIVE,
    "time_budget_minutes": NON_NEGATIVE, "time_budget_start": NON_NEGATIVE,
    "gradient_accumulation_steps": POSITIVE, "keep_checkpoint_max": POSITIVE,
    # schedule
    "learning_rate": Range(0, low_open=True), "num_train_epochs": Range(0, low_open=True),
    "num_train_steps": POSITIVE, "num_warmup_steps": NON_NEGATIVE, "warmup_proportion": PROBABILITY,
    "weight_decay": NON_NEGATIVE, "pld_theta": SHARE, "pld_gamma": NON_NEGATIVE, "layerwise_lr_decay": SHARE,
    "reinit_top_layers": NON_NEGATIVE, "focal_gamma": NON_NEGATIVE, "label_smoothing": PROBABILITY,
    "multi_label_threshold": PROBABILITY,
    "ema_decay": Range(0, 1, high_open=True), "rdrop_alpha": NON_NEGATIVE,
    "adversarial_epsilon": Range(0, low_open=True), "adversarial_steps": POSITIVE,
    "lora_rank": NON_NEGATIVE, "lora_alpha": NON_NEGATIVE, "residual_attention_warmup_steps": NON_NEGATIVE,
    "head_fit_steps": NON_NEGATIVE,
    # loops, checkpoints, evaluation
    "save_checkpoints_steps": POSITIVE, "iterations_per_loop": POSITIVE, "eval_every_steps": NON_NEGATIVE,
    "early_stopping_patience": NON_NEGATIVE, "max_restarts": NON_NEGATIVE, "shuffle_buffer_size": NON_NEGATIVE,
    "restart_deadline": NON_NEGATIVE,
    # data creation
    "masked_lm_prob": SHARE, "short_seq_prob": PROBABILITY,
    # seeds: numpy's (which Keras seeds) take 0 .. 2**32 - 1; the data creation's Python
    # `random` takes any integer, as the original's
    "seed": Range(0, 2**32 - 1), "random_seed": ANY,
    "null_score_diff_threshold": ANY,
})

_NUMERIC = ("IntegerParser", "FloatParser")
# Libraries that define absl flags of their own as they are imported (TensorFlow's tensor tracer
# does, so a script entered after `import tensorflow` sees them).
_OTHER_LIBRARIES = ("absl", "tensorflow", "keras", "jax")


def numeric_flags(flag_values: flags.FlagValues = flags.FLAGS) -> list[str]:
    """The names of the numeric flags defined in `flag_values` (other libraries' left out)."""
    names = []
    for name, flag in flag_values._flags().items():
        module = (flag_values.find_module_defining_flag(name) or "").split(".")[0]
        if name == flag.name and type(flag.parser).__name__ in _NUMERIC and module not in _OTHER_LIBRARIES:
            names.append(name)
    return sorted(names)


def register(flag_values: flags.FlagValues = flags.FLAGS, skip: Collection[str] = ()) -> None:
    """A validator for each numeric flag defined (but those in `skip`, validated already), from
    `RANGES`. A numeric flag the table lacks is a `KeyError` naming it (a programming error,
    caught by the tests)."""
    for name in sorted(set(numeric_flags(flag_values)) - set(skip)):
        allowed = RANGES[name]
        if allowed is not None:
            flags.register_validator(name, allowed.accepts, message=allowed.describe(), flag_values=flag_values)
