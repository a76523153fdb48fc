"""What the training driver is given: the run's options (`RunOptions`, from the scripts' shared
flags) and a task's training definition (`TrainingTask`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import tensorflow as tf

from bert_realformer import tfrecords
from bert_realformer.training.adversarial import Adversary
from bert_realformer.training.best_checkpoint import Selection
from bert_realformer.training.eval_history import PeriodicEval
from bert_realformer.training.stuck import StuckWatch
from bert_realformer.training.trainer import LossFn, TotalsFn


@dataclasses.dataclass
class RunOptions:
    """What the shared flags of the scripts configure (see `commandline.training_flags`)."""
    output_dir: str
    init_checkpoint: str | None = None
    seed: int = 12345
    mixed_precision: str = "none"          # none | bf16 | fp16 (dynamic loss scaling)
    use_xla: bool = False
    xla_prediction: bool = False           # prediction and evaluation compiled by XLA (one device)
    tflite_prediction: bool = False        # prediction and evaluation run by TensorFlow Lite (`lite`)
    quantize: str = "none"                 # int8: prediction, evaluation and export in int8 (`int8`)
    optimizer: str = "adamw"               # adamw (the original's) | lamb
    weight_decay: float = 0.01
    adam_bias_correction: bool = False     # AdamW with Adam's bias correction (fine-tuning's default)
    gradient_accumulation_steps: int = 1
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    keep_checkpoint_max: int = 5
    is_chief: bool = True                  # writes model.ckpt-N, summaries and results
    claim_output_dir: bool = False         # a training run's chief: one run per output directory
    write_dir: str | None = None           # where this worker's training state goes (default output_dir)
    on_stuck: str = "warn"                 # warn | restart (`train_restarting`: from the start, next seed)
    max_restarts: int = 3
    restart_deadline: float = 0.0          # Unix seconds: no restart that would end later (`RestartDeadline`)
    keep_recorded_seed: bool = False       # a resumed run takes the seed it started (or restarted) with
    layerwise_lr_decay: float = 1.0        # each encoder layer's rate this times the one above (`layerwise`)
    reinit_top_layers: int = 0             # top encoder layers (and the pooler) re-initialised before training
    ema_decay: float = 0.0                 # > 0: keep moving averages of the weights (`averaging`) and use them
    adversary: Adversary | None = None     # adversarial training on the word embeddings (`adversarial`)
    # Seed Python, NumPy, TensorFlow and Keras with `seed` before each build, so that `seed` decides
    # the initial weights and dropout (a process-wide change: the scripts ask for it).
    seed_globally: bool = False


@dataclasses.dataclass
class TrainingTask:
    """A task's training definition.

    dataset_fn: `dataset_fn(start)` -> a dataset of global micro-batches (feature dicts with
      batch dimension `batch_size`) from micro-batch number `start` on, the same sequence
      whenever it is called: a pure function of the position, for exact resume.
    loss_fn, totals_fn, metric_names: see `TrainLoop`.
    """
    loss_fn: LossFn
    totals_fn: TotalsFn
    dataset_fn: Callable[[int], tf.data.Dataset]
    batch_size: int
    learning_rate: float
    num_train_steps: int
    num_warmup_steps: int
    metric_names: Sequence[str] = ("loss",)
    input_files: Sequence[str] = ()     # the TFRecord files dataset_fn reads: a damaged one is named
    input_name: str = "the training data"  # what they are, for that message
    input_option: str | None = None     # or the option that gave them (the scripts name its flag)
    input_advice: str = tfrecords.DAMAGED_INPUT_ADVICE  # what to do about a damaged one
    periodic_eval: PeriodicEval | None = None  # held-out evaluation every N steps (the chief's)
    keep_best: Selection | None = None  # with periodic_eval: OUTPUT_DIR/best/ and early stopping
    stuck: StuckWatch | None = None     # the check for a run that learns nothing
    summary: str = ""                   # what it trains on, for the user ("2,000 examples, 2,340 windows")

    def next_boundary(self, step: int, save_checkpoints_steps: int) -> int:
        """The step the loop of steps from `step` must end at (or before): the next save, the end
        of training, the next evaluation, the stuck check's next window."""
        boundary = min((step // save_checkpoints_steps + 1) * save_checkpoints_steps, self.num_train_steps)
        if self.periodic_eval is not None:  # (every worker: loops stay the same size)
            boundary = min(boundary, self.periodic_eval.next_due(step, self.num_train_steps))
        if self.stuck is not None:
            boundary = min(boundary, self.stuck.next_boundary(step))
        return boundary
