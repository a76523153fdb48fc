"""Fine-tuning with low-rank adaptation (`--lora_rank=R`; the model side is `modeling.lora`): the
encoder's chosen dense layers get rank-R factors, and only those and the task's head train.

The model is adapted as it is built (`adapted`), before any weights are set: a starting
checkpoint's kernels go into the frozen W (its B zeroed, so the model starts as the checkpoint),
and a resumed run's training state restores W, A and B as they were. Everything the run writes
besides its training state holds plain merged kernels (model.ckpt-N, best/, the export), which
every consumer reads as it reads a fully fine-tuned run's. A run resumes only with the LoRA it
started with (`LowRankAdaptation`): its training state holds that model's factors.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.training import recorded_options
from bert_realformer.training.hooks import HookRun, TrainingHook
from modeling.lora import DEFAULT_TARGETS, SCALE, TARGETS, adapted_layers, count_weights, enable_lora

if TYPE_CHECKING:  # annotations only
    import keras

    from modeling import BertConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Lora:
    """Rank-`rank` factors on the `targets` dense layers of every encoder layer (`modeling.lora.TARGETS`),
    scaled by `alpha / rank` (`alpha` None: `rank`, a scale of 1)."""
    rank: int
    alpha: float | None = None
    targets: tuple[str, ...] = DEFAULT_TARGETS

    def __post_init__(self):
        if self.rank < 1:
            raise InputError(f"lora_rank={self.rank}: a rank is a positive integer", options=("lora_rank",))
        if self.alpha is not None and self.alpha <= 0:
            raise InputError(f"lora_alpha={self.alpha}: expected a positive scale", options=("lora_alpha",))
        unknown = [target for target in self.targets if target not in TARGETS]
        if unknown or not self.targets or len(set(self.targets)) != len(self.targets):
            raise InputError(f"lora_targets={','.join(self.targets)}: expected distinct names among "
                             f"{', '.join(TARGETS)}", options=("lora_targets",))

    @property
    def scale(self) -> float:
        """alpha / rank: what the factors' product is multiplied by."""
        return (self.alpha if self.alpha is not None else self.rank) / self.rank

    def recorded(self) -> dict:
        """What a run's record of its options holds (`training_options.json`)."""
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets)}

    def describe(self) -> str:
        return f"rank {self.rank} (alpha {self.scale * self.rank:g}) on " + ", ".join(self.targets)


def adapted(build_model: Callable[[BertConfig], keras.Model], lora: Lora | None
            ) -> Callable[[BertConfig], keras.Model]:
    """`build_model`, its model adapted with `lora` (built; None: `build_model` itself)."""
    if lora is None:
        return build_model

    def build(config):
        model = build_model(config)
        enable_lora(model, lora.rank, lora.alpha, lora.targets)
        return model
    return build


def trainable_line(model: keras.Model, lora: Lora) -> str:
    """What trains: the share of the model's weights, and where the factors sit."""
    trainable, total = count_weights(model.trainable_variables), count_weights(model.weights)
    layers = len(adapted_layers(model)) // len(lora.targets)
    return (f"LoRA {lora.describe()} in {layers} layers: {trainable:,} of {total:,} weights train "
            f"({100 * trainable / total:.2f}%: the factors and the task's head)")


class LowRankAdaptation(TrainingHook):
    """A LoRA run's part in training: it records the LoRA it started with, refuses to resume a
    run with another (or a run started without, or with, when this one is not), and says what
    trains once the weights are set."""

    def __init__(self, lora: Lora | None):
        self.lora = lora

    def state_variables(self, run: HookRun, resumed_from: str | None) -> dict:
        if run.resuming:
            recorded = recorded_options.read(run.write_dir).get("lora")
            wanted = None if self.lora is None else self.lora.recorded()
            if recorded != wanted:
                started = "without LoRA" if recorded is None else \
                    f"with LoRA {Lora(recorded['rank'], recorded['alpha'], tuple(recorded['targets'])).describe()}"
                raise InputError(f"output_dir={run.output_dir} holds a run started {started}: resume it with the "
                                 "same lora_rank, lora_alpha and lora_targets, or start a new output_dir",
                                 options=("output_dir", "lora_rank", "lora_alpha", "lora_targets"))
        if self.lora is None:
            return {}
        # (the factors' scale beside them, so that a reader of the state merges them as the model does)
        return {SCALE: tf.Variable(self.lora.scale, trainable=False, dtype=tf.float32, name=SCALE)}

    def recorded_options(self, run: HookRun) -> dict:
        return {} if self.lora is None else {"lora": self.lora.recorded()}

    def on_weights_set(self, run: HookRun) -> list[str]:
        if self.lora is None:
            return []
        line = trainable_line(run.model, self.lora)
        logger.info(line)
        return [line]
