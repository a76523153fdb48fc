"""The one training driver: what every training script (and any new task) hands its model and
task definition to.

    driver = Driver(strategy, lambda: modeling.BertClassifier(config, 2), RunOptions(output_dir=...))
    driver.train(TrainingTask(loss_fn, totals_fn, ("loss",), batch_size=32, dataset_fn=...,
                              learning_rate=2e-5, num_train_steps=1000, num_warmup_steps=100))
    step = driver.restore_for_inference()       # eval/predict-only runs
    outputs = driver.predict(dataset, lambda model, features: {"logits": model(features)})

It owns the strategy scope, the optimizer, which weights to start from (`training.checkpointing`
has the policy), resume, the step loop (`TrainLoop.run_steps`: loops of steps sized by time, at
most `iterations_per_loop`), progress output, TensorBoard summaries, training-state
checkpoints, the config recorded in the output directory (`training.recorded_config`), the
final `model.ckpt-N` export, predictions under the strategy, and the one-line endings of a run
that diverges (`Diverged`) or meets a damaged input record.

Resume is exact: the training state holds the weights, the optimizer, the loss scale and the
input position; the input is a pure function of its position (`dataset_fn(start)`), and dropout
and PLD draws are a function of the step (`modeling.randomness`). A run killed after a
checkpoint and restarted with the same flags ends with the weights of the uninterrupted run.
"""

import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_realformer import checkpoints, report, run_claim, storage, tfrecords
from bert_realformer.checkpoints import training_states
from bert_realformer.errors import Diverged, InputError, Stopped
from bert_realformer.training import recorded_config
from bert_realformer.training.eval_history import EvalHistory, PeriodicEval
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.preemption import StopAgreement, StopSignals
from bert_realformer.training.progress import LoopSizes, Progress
from bert_realformer.training.trainer import LossFn, TotalsFn, TrainLoop, global_batch_slices


@dataclasses.dataclass
class RunOptions:
    """What the shared flags of the scripts configure (see `commandline.training_flags`)."""
    output_dir: str
    init_checkpoint: str | None = None
    seed: int = 12345
    mixed_precision: str = "none"          # none | bf16 | fp16 (dynamic loss scaling)
    use_xla: bool = False
    optimizer: str = "adamw"               # adamw (the original's) | lamb
    weight_decay: float = 0.01
    gradient_accumulation_steps: int = 1
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    keep_checkpoint_max: int = 5
    is_chief: bool = True                  # writes model.ckpt-N, summaries and results
    claim_output_dir: bool = False         # a training run's chief: one run per output directory
    write_dir: str | None = None           # where this worker's training state goes (default output_dir)


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
    input_flag: str = "--input_file"    # the flag that gave them, for that message
    periodic_eval: PeriodicEval | None = None  # held-out evaluation every N steps (the chief's)
    summary: str = ""                   # what it trains on, for the user ("2,000 examples, 2,340 windows")


class Driver:
    """Builds the model (seeded, under the strategy and the dtype policy) and runs it.

    Args:
      strategy: a `tf.distribute` strategy (`training.distribution.make_strategy`).
      build_model: `() -> keras.Model`, a model with TF1 names (`modeling.tf1_variable_map`).
      options: `RunOptions`.
      stream: where progress and the weights line go (stderr).
    """

    def __init__(self, strategy: tf.distribute.Strategy, build_model: Callable[[], keras.Model],
                 options: RunOptions, stream=None):
        from bert_realformer.training.distribution import set_mixed_precision
        self.strategy = strategy
        self.options = options
        self.stream = stream or sys.stderr
        storage.makedirs(options.output_dir)
        self.claim = run_claim.claim(options.output_dir) if options.claim_output_dir else None
        # (claimed before anything expensive: a second run on the directory stops at once)
        keras.utils.set_random_seed(options.seed)
        set_mixed_precision(options.mixed_precision)
        with strategy.scope():
            self.model = build_model()
            self.model.build()
        warning = recorded_config.check_against_recorded(self.model.config, options.output_dir)
        if warning:
            self._say(warning)
        self.weights = None  # the Checkpoint the weights came from (None: fresh)
        self._predict_steps = {}  # (fn, input spec) -> its traced step: later calls re-use it

    def _say(self, text):
        report.say(text, self.stream)

    @property
    def write_dir(self):
        return self.options.write_dir or self.options.output_dir

    # ------------------------------------------------------------------ training
    def train(self, task: TrainingTask) -> int:
        """Trains to `task.num_train_steps` (resuming when the output directory holds a
        training state), saving the training state every `save_checkpoints_steps` and at the
        end, then exports `OUTPUT_DIR/model.ckpt-N`. Returns N."""
        options, strategy = self.options, self.strategy
        # Before any step: a training state that cannot be saved would lose the steps before it.
        state_dir = os.path.join(self.write_dir, training_states.TRAINING_STATE)
        existed = storage.isdir(state_dir)
        storage.check_writable_dir(state_dir, "--output_dir")
        if not existed:  # (a run refused later, e.g. for its weights, leaves nothing behind)
            storage.rmtree(state_dir)
        with strategy.scope():
            optimizer = create_optimizer(task.learning_rate, task.num_train_steps, task.num_warmup_steps,
                                         options.optimizer, options.weight_decay)
            loop = TrainLoop(strategy, self.model, optimizer, task.loss_fn, task.totals_fn,
                             task.metric_names, accumulation_steps=options.gradient_accumulation_steps,
                             loss_scaling=options.mixed_precision == "fp16", use_xla=options.use_xla)
        state = tf.train.Checkpoint(variables=training_states.named_variables(self.model),
                                    optimizer=optimizer, **loop.state())
        manager = tf.train.CheckpointManager(state, os.path.join(self.write_dir, training_states.TRAINING_STATE),
                                             max_to_keep=options.keep_checkpoint_max)
        _remove_unfinished_saves(manager.directory)  # (a killed run's; one run per directory)
        self._start_training(state, manager)
        if options.is_chief:
            recorded_config.record(self.model.config, options.output_dir)
        step = int(optimizer.iterations.numpy())
        self._check_workers_agree(step)
        position = int(loop.input_position.numpy())
        iterator = iter(strategy.distribute_datasets_from_function(
            lambda context: global_batch_slices(task.dataset_fn(position), task.batch_size, context)))
        writer = (tf.summary.create_file_writer(os.path.join(self.write_dir, "train"))
                  if options.is_chief else None)
        examples_per_step = task.batch_size * options.gradient_accumulation_steps
        progress = Progress(task.num_train_steps, examples_per_step, step, self.stream)
        history = self._eval_history(task, step)
        sizes, agreement = LoopSizes(options.iterations_per_loop), StopAgreement(strategy)
        attempts = sizes.next()
        with StopSignals(self.stream) as signals, self._naming_what_is_kept(manager):
            while step < task.num_train_steps:
                next_save = (step // options.save_checkpoints_steps + 1) * options.save_checkpoints_steps
                attempts = min(attempts, next_save - step, task.num_train_steps - step)
                if task.periodic_eval is not None:  # (every worker: loops stay the same size)
                    attempts = min(attempts, task.periodic_eval.next_due(step, task.num_train_steps) - step)
                started = time.time()
                with tfrecords.naming_damaged_file(task.input_files, task.input_flag,
                                                   self._kept(manager)):
                    metrics = loop.run_steps(iterator, attempts)
                diverged = bool(metrics.pop("diverged"))
                previous, step = step, int(optimizer.iterations.numpy())
                if diverged:
                    raise self._diverged(step, metrics, manager, task)
                sizes.record(step - previous, time.time() - started)
                progress.update(step, metrics)
                if writer is not None:
                    self._summaries(writer, step, metrics, optimizer, progress.steps_per_second, examples_per_step)
                if step % options.save_checkpoints_steps == 0 or step >= task.num_train_steps:
                    _save_state(manager, step)
                if history is not None and task.periodic_eval.due(step, task.num_train_steps):
                    self._evaluate_into(history, task.periodic_eval, step)
                self._check_claim()
                stop, attempts = agreement.agreed(signals.received, sizes.next())
                if stop is not None:
                    self._stop(stop, signals.received, step, manager)
        if options.is_chief:
            prefix = checkpoints.save_tf1_checkpoint(self.model, os.path.join(self.write_dir, f"model.ckpt-{step}"))
            self._say(f"wrote {prefix}")
        return step

    def _check_workers_agree(self, step):
        """Several workers must resume from one step (each restores its own training state; one
        killed during a save keeps an older one): one all-gather of the steps; where they
        differ, every worker stops naming each one's step."""
        strategy = self.strategy
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return

        @tf.function
        def gathered(value):
            return strategy.gather(strategy.run(lambda: tf.reshape(value, [1])), axis=0)

        steps = [int(s) for s in gathered(tf.constant(step, tf.int64)).numpy()]
        cluster = strategy.cluster_resolver.cluster_spec().as_dict()
        workers = len(cluster.get("chief", [])) + len(cluster.get("worker", []))
        per_worker = max(1, len(steps) // max(1, workers))  # (replicas are numbered worker by worker)
        by_worker = steps[::per_worker]
        if len(set(by_worker)) > 1:
            held = ", ".join(f"worker {i} at step {s}" for i, s in enumerate(by_worker))
            raise InputError(f"the workers would resume from training states of different steps ({held}): remove "
                             f"the training states after step {min(by_worker)} (each worker's "
                             f"{training_states.TRAINING_STATE}/ckpt-N with N > {min(by_worker)}, and name ckpt-"
                             f"{min(by_worker)} in its 'checkpoint' file) so that all resume from there, then run "
                             "the same command on every worker again")

    def _eval_history(self, task, step):
        """The chief's eval history when the task evaluates periodically, trimmed to the step
        training resumes from, with the point due at that step written if it is missing."""
        if task.periodic_eval is None or not self.options.is_chief:
            return None
        history = EvalHistory(self.options.output_dir)
        history.resume_at(step)
        if task.periodic_eval.due(step, task.num_train_steps) and not history.has(step):
            self._evaluate_into(history, task.periodic_eval, step)
        return history

    def _evaluate_into(self, history, periodic_eval, step):
        result = periodic_eval.evaluate(step)
        history.add(step, result)
        shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(result.items()) if k != "global_step")
        self._say(f"eval at step {step}: {shown}")

    @staticmethod
    def _kept(manager):
        """What a run that fails now keeps, for its last line."""
        if manager.latest_checkpoint:
            return f"; the training state {manager.latest_checkpoint} is intact"
        return "; no training state was saved yet"

    @contextlib.contextmanager
    def _naming_what_is_kept(self, manager):
        """An error leaving the training loop (a full disk, memory, a lost worker) carries
        `kept`, the training state that survives it, for the script's last line
        (`bert_realformer.runner`)."""
        try:
            yield
        except Exception as error:
            error.kept = self._kept(manager).removeprefix("; ")
            raise

    @staticmethod
    def _diverged(step, metrics, manager, task):
        """The error that ends a run whose step `step + 1` had a loss or gradient norm that is
        not finite; nothing from that step on is saved."""
        last = manager.latest_checkpoint or "none (no training state saved yet)"
        return Diverged(
            f"training diverged at step {step + 1}: loss {float(metrics['loss']):g}, gradient norm "
            f"{float(metrics['gradient_norm']):g}; stopped without saving it (last good training state: {last}); "
            f"try a lower --learning_rate (now {task.learning_rate:g}) or more warmup")

    def _check_claim(self):
        if self.claim is not None and self.claim.lost_to is not None:
            raise run_claim.DirectoryInUseError(
                f"--output_dir={self.options.output_dir} was taken over by {run_claim.describe(self.claim.lost_to)} "
                "(this run's claim had gone stale): stopping")

    def _stop(self, signal_number, received, step, manager):
        """Saves a training state at `step` (unless the loop just did) and ends the run."""
        if manager.latest_checkpoint is None or training_states.step_of(manager.latest_checkpoint) != step:
            _save_state(manager, step)
        name = signal.Signals(signal_number).name
        sent = "" if received == signal_number else " (sent to another worker)"
        raise Stopped(f"stopped by {name}{sent} at step {step}: training state saved to "
                      f"{manager.latest_checkpoint}; run the same command again to resume", signal_number)

    def _start_training(self, state, manager):
        """Resumes from this run's training state, else loads the starting weights."""
        if manager.latest_checkpoint and self._holds_optimizer(manager.latest_checkpoint):
            prefix = manager.latest_checkpoint
            training_states.check_training_state_matches(self.model, prefix)
            with checkpoints.reading_checkpoint(prefix):
                state.restore(prefix).assert_existing_objects_matched()
            self.weights = training_states.Checkpoint(prefix, training_states.TRAINING_STATE_KIND,
                                                    training_states.step_of(prefix))
            self._say(f"weights: resuming from {prefix} at step {self.weights.step}")
            return
        found = training_states.choose_weights(self.options.output_dir, self.options.init_checkpoint,
                                             training=True)
        report = training_states.load_weights(self.model, found) if found else None
        self.weights = found
        self._describe_weights(found, report)

    def _describe_weights(self, found, report):
        """The `weights:` line, and one naming a change of variant from the checkpoint's
        recorded config (one in another directory than this run's)."""
        self._say(training_states.describe(found, report))
        if found is not None and not self._in_output_dir(found.prefix):
            change = recorded_config.variant_change(self.model.config, found.prefix)
            if change:
                self._say(change)

    def _in_output_dir(self, prefix):
        return os.path.normpath(training_states.run_directory(prefix)) == os.path.normpath(self.options.output_dir)

    @staticmethod
    def _holds_optimizer(prefix):
        return any(name.startswith("optimizer/") for name in checkpoints.checkpoint_keys(prefix))

    @staticmethod
    def _summaries(writer, step, metrics, optimizer, steps_per_second, examples_per_step):
        with writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
            tf.summary.scalar("learning_rate", optimizer.learning_rate)
            if steps_per_second is not None:  # (none for the first loop: tracing)
                tf.summary.scalar("examples_per_second", steps_per_second * examples_per_step)
        writer.flush()

    # ------------------------------------------------------------------ eval / predict
    def restore_for_inference(self) -> int:
        """Loads the weights the policy chooses for an eval/predict-only run (every weight of
        the model must be there); returns their step. A one-line error when there are none."""
        found = training_states.choose_weights(self.options.output_dir, self.options.init_checkpoint,
                                             training=False)
        report = training_states.load_weights(self.model, found, strict=True)
        self.weights = found
        self._describe_weights(found, report)
        return found.step

    def predict(self, dataset: tf.data.Dataset, fn: Callable) -> dict:
        """`fn(model, features) -> {name: [B, ...] tensor}` over every batch of `dataset`, under
        the strategy (batches split across replicas); returns {name: numpy array} with the
        examples in the dataset's order. Multi-worker runs predict on this worker alone.
        The step is traced once for the dataset's element spec, so batches that differ in
        sequence length (dynamic padding) share one graph; a later call with the same `fn` and
        spec re-uses it."""
        strategy = self.strategy
        this_worker_only = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        batches = dataset if this_worker_only else strategy.experimental_distribute_dataset(dataset)
        key = (fn, repr(batches.element_spec))
        if key not in self._predict_steps:
            self._predict_steps[key] = self._predict_step(fn, batches.element_spec, this_worker_only)
        step = self._predict_steps[key]
        parts = {}
        for features in batches:
            for name, value in step(features).items():
                parts.setdefault(name, []).append(np.asarray(value))
        return {name: np.concatenate(values) for name, values in parts.items()}

    def _predict_step(self, fn, spec, this_worker_only):
        strategy = self.strategy

        @tf.function(input_signature=[spec])
        def distributed_step(features):
            outputs = strategy.run(lambda f: fn(self.model, f), args=(features,))
            return {k: strategy.gather(v, axis=0) for k, v in outputs.items()}

        @tf.function(input_signature=[spec])
        def this_worker_step(features):
            return fn(self.model, features)

        return this_worker_step if this_worker_only else distributed_step


def _save_state(manager, step):
    """Saves the training state of `step`; a save that fails (a full disk) leaves no partial
    files behind."""
    try:
        manager.save(checkpoint_number=step)
    except BaseException:
        _remove_unfinished_saves(manager.directory)
        for path in storage.glob(os.path.join(manager.directory, f"ckpt-{step}.*")):
            storage.remove(path)
        raise


def _remove_unfinished_saves(state_dir):
    """TensorFlow writes a save into `ckpt-N_temp/` and moves it into place at the end: such
    directories are what a failed or killed save left."""
    for path in storage.glob(os.path.join(state_dir, "ckpt-*_temp*")):
        storage.rmtree(path)
