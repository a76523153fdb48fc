"""What every fine-tuning task implements: `FinetuningTask`. The one fine-tuning flow
(`finetuning.flow.run`) drives any task through it: read the splits, train with dev-set
evaluations (best checkpoint, early stopping, the stuck check), the final evaluation into
eval_results.txt, predictions, and an export where the task has one. A task only says what is
its own: its data, its head and loss, how it predicts, what its evaluation reports and what it
writes. See docs/adding-a-task.md.

    task = registry.get("ner")(options, data_dir="conll2003", task_name="conll2003", use_crf=True)
    finetuning.run(task, plan, make_driver)
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bert_realformer.errors import InputError

if TYPE_CHECKING:  # annotations only
    import keras
    import numpy as np

    from bert_realformer.finetuning.best_checkpoint import Selection
    from bert_realformer.finetuning.schedule import Schedule
    from bert_realformer.training.driver import Driver, TrainingTask
    from modeling import BertConfig
    from tokenization import FullTokenizer

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    """What every task is given: where the run writes, the sequence length, the evaluation and
    prediction batch sizes, and whether those batches are cut to their longest sequence."""
    output_dir: str
    max_seq_length: int
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    dynamic_padding: bool = True

    def batch_size(self, split: str) -> int:
        """The batch size of prediction over `split` ("dev" or "test")."""
        return self.eval_batch_size if split == "dev" else self.predict_batch_size


@dataclasses.dataclass
class TaskData:
    """A task's examples of each split the run reads (None: not read)."""
    train: Any = None
    dev: Any = None
    test: Any = None


@dataclasses.dataclass
class Evaluation:
    """One evaluation of the dev set.

    result: eval_results.txt's entries (metric -> value, `global_step` among them).
    predictions: what `write_predictions` writes for the dev set.
    classes: the class each example (or token) got, [N] ints, or None where there are no
      classes (spans, scores): the stuck check's "one class for everything".
    """
    result: dict
    predictions: Any
    classes: np.ndarray | Sequence[int] | None = None


class FinetuningTask(abc.ABC):
    """A fine-tuning task. Subclasses set `metrics` (what the evaluation reports, the main metric
    first: best-checkpoint selection and early stopping compare it unless --keep_best_by names
    another) and implement the abstract methods; `register` them under a name
    (`tasks.registry`)."""

    metrics: tuple[str, ...] = ()         # (a task may settle them in `read`, e.g. by its labels)
    shown: tuple[str, ...] | None = None   # printed after the final evaluation (default: `metrics`)

    def __init__(self, options: TaskOptions):
        self.options = options

    # ------------------------------------------------------------------ data and model
    @abc.abstractmethod
    def read(self, splits: Sequence[str]) -> TaskData:
        """The examples of each of `splits` (a subset of `SPLITS`), checked: an `InputError`
        names the file and what is wrong."""

    @abc.abstractmethod
    def build_model(self, config: BertConfig) -> keras.Model:
        """The encoder with this task's head (a model of `modeling.models`)."""

    @abc.abstractmethod
    def training_task(self, examples: Any, tokenizer: FullTokenizer, schedule: Schedule) -> TrainingTask:
        """The driver's `TrainingTask` over the training examples: features, batches, the loss."""

    # ------------------------------------------------------------------ prediction and evaluation
    @abc.abstractmethod
    def predict(self, driver: Driver, tokenizer: FullTokenizer, examples: Any, split: str) -> Any:
        """The model's predictions for `examples` of `split` ("dev" or "test") with the driver's
        current weights, in whatever form `evaluate` and `write_predictions` read."""

    @abc.abstractmethod
    def evaluate(self, examples: Any, predictions: Any, step: int, selection: Selection) -> Evaluation:
        """The dev set's `Evaluation` at `step`. `selection` is what picks the best checkpoint
        (a task that chooses among readings of its predictions chooses by it)."""

    @abc.abstractmethod
    def write_predictions(self, examples: Any, predictions: Any, split: str) -> list[str]:
        """Writes the predictions of `split` into the output directory (the original's files:
        test_results.tsv, predictions.json, ...), each atomically; returns their paths (none
        where the task writes no file for `split`)."""

    # ------------------------------------------------------------------ optional
    @property
    def num_classes(self) -> int | None:
        """K of the stuck check (a training loss at ln K learns nothing); None: no such check."""
        return None

    @property
    def chance_loss(self) -> float | None:
        """The training loss of a model that has learned nothing, where it is not ln K (a task
        trained with another loss than cross-entropy); None: ln `num_classes`."""
        return None

    @property
    def stuck_hint(self) -> str | None:
        """An option of this task's run that most likely keeps a stuck run at chance, and what to
        change (the stuck warning says it first), or None."""
        return None

    @property
    def label_names(self) -> Sequence[str] | None:
        """The names of the classes `Evaluation.classes` counts (for messages), or None."""
        return None

    def settle(self, driver: Driver) -> None:
        """Called once the weights prediction uses are loaded and the final evaluation (if any)
        ran: a task settles what it chose from those weights' record here."""
        return None

    def recorded_options(self) -> dict:
        """What a training run records in OUTPUT_DIR/training_options.json for later readers of
        its checkpoints (a conversion): written before training and again after `settle`."""
        return {}

    def export(self, driver: Driver, tokenizer: FullTokenizer, export_dir: str) -> str:
        """Exports a SavedModel (the tokenizer inside) under `export_dir`; returns its path."""
        raise InputError(f"{type(self).__name__} has no SavedModel export")


def best_metric(keep_best_by: str | None, metrics: Sequence[str]) -> str:
    """The metric that picks the best checkpoint: `keep_best_by` (`loss` meaning `eval_loss`
    where the evaluation reports it), else the task's main metric (the first of `metrics`)."""
    if not keep_best_by:
        return metrics[0]
    if keep_best_by == "loss" and "eval_loss" in metrics:
        return "eval_loss"
    return keep_best_by
