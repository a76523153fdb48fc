"""The warm start from a Post-LN checkpoint to RealFormer (`--residual_attention_warmup_steps=N`).

Read as RealFormer, a checkpoint trained without residual attention is another function at step 0:
layer l softmaxes the scores of l + 1 layers added up, a scale it never saw. The warm start weighs
the scores each layer is handed by a factor (`modeling.set_residual_attention_factor`) that rises
linearly with the optimizer step,

    factor(step) = min(1, step / N)

so that at step 0 the model is the Post-LN (or Pre-LN) checkpoint itself, and from step N on it is
exactly the paper's RealFormer (sum or running mean), which is what `model.ckpt-N` then holds: the
factor is no weight of the model. It is a function of the step, which the training state holds, so
a resumed run weighs every step as the uninterrupted run did; the run records N
(`training_options.json`) and a resumed run keeps the N it started with.

STUDY.md, "From a released checkpoint", measures it against continuing without it.
"""

from __future__ import annotations

import os

import tensorflow as tf

import modeling
from bert_realformer.training import recorded_options
from bert_realformer.training.hooks import HookRun, TrainingHook

OPTION = "residual_attention_warmup_steps"  # its flag and its key in training_options.json


def factor_at(step, warmup_steps: int):
    """min(1, step / warmup_steps), for a Python number or an integer step tensor."""
    if isinstance(step, int):
        return min(1.0, step / warmup_steps)
    return tf.minimum(1.0, tf.cast(step, tf.float32) / float(warmup_steps))


class ResidualAttentionWarmup(TrainingHook):
    """Raises the RealFormer model's residual attention factor from 0 at step 0 to 1 at step
    `warmup_steps`: in each step's graph, from the step its update is made at (a tensor the forward
    pass uses), and on the model between loops of steps, for what runs there (the held-out
    evaluations)."""

    def __init__(self, warmup_steps: int):
        self.wanted = warmup_steps
        self.warmup_steps = warmup_steps

    def state_variables(self, run: HookRun, resumed_from: str | None) -> dict:
        if run.resuming:
            recorded = recorded_options.read(run.write_dir).get(OPTION)
            if recorded is not None and int(recorded) != self.wanted:
                self.warmup_steps = int(recorded)
                run.say(f"resuming with --{OPTION}={recorded}, as this run started "
                        f"({os.path.join(run.write_dir, recorded_options.FILE_NAME)}); --{OPTION}={self.wanted} "
                        "applies to new runs")
        return {}  # (the factor follows from the step, which the training state holds)

    def recorded_options(self, run: HookRun) -> dict:
        return {OPTION: self.warmup_steps}

    def wrap_loss(self, run: HookRun, loss_fn):
        def warmed_up(model, features, step, totals):
            with modeling.residual_attention_factor_scope(model, factor_at(step, self.warmup_steps)):
                return loss_fn(model, features, step, totals)
        return warmed_up

    def on_weights_set(self, run: HookRun) -> list[str]:
        self._set(run, run.first_step)
        if run.first_step >= self.warmup_steps:
            return []
        factor = factor_at(run.first_step, self.warmup_steps)
        return [f"residual attention warm-up: the carried scores weigh {factor:g} at step {run.first_step}, "
                f"rising to 1 at step {self.warmup_steps} (plain "
                f"{run.model.config.variant.name} from there on)"]

    def after_steps(self, run: HookRun, previous: int, step: int, metrics: dict) -> None:
        self._set(run, step)

    def _set(self, run: HookRun, step: int) -> None:
        with run.strategy.scope():
            modeling.set_residual_attention_factor(run.model, factor_at(step, self.warmup_steps))
