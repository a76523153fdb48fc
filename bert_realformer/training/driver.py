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
from bert_realformer.checkpoints import state_recovery, training_states
from bert_realformer.errors import Diverged, InputError, Stopped
from bert_realformer.training import best_checkpoint, recorded_config, recorded_options
from bert_realformer.training.best_checkpoint import BestCheckpoint, Selection
from bert_realformer.training.eval_history import EvalHistory, PeriodicEval
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.preemption import StopAgreement, StopSignals
from bert_realformer.training.progress import LoopSizes, Progress
from bert_realformer.training.stuck import StuckWatch, Verdict, advice
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
    keep_recorded_seed: bool = False       # a resumed run takes the seed it started (or restarted) with


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
    input_name: str = "the training data"  # what they are, for that message (e.g. the flag that gave them)
    input_advice: str = tfrecords.DAMAGED_INPUT_ADVICE  # what to do about a damaged one
    periodic_eval: PeriodicEval | None = None  # held-out evaluation every N steps (the chief's)
    keep_best: Selection | None = None  # with periodic_eval: OUTPUT_DIR/best/ and early stopping
    stuck: StuckWatch | None = None     # the check for a run that learns nothing
    summary: str = ""                   # what it trains on, for the user ("2,000 examples, 2,340 windows")


@dataclasses.dataclass
class _Run:
    """What one `Driver.train` call works with (`Driver._prepare`)."""
    optimizer: keras.optimizers.Optimizer
    loop: TrainLoop
    manager: tf.train.CheckpointManager
    iterator: object
    writer: object
    examples_per_step: int
    progress: Progress
    best: BestCheckpoint | None
    history: EvalHistory | None
    bias_correction: bool


class StuckRun(Exception):
    """Raised out of `Driver.train` when a run is stuck and may restart (`train_restarting`)."""

    def __init__(self, verdict: Verdict):
        super().__init__(verdict.reason)
        self.verdict = verdict


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
        set_mixed_precision(options.mixed_precision)
        if options.keep_recorded_seed:
            self.options = options = self._recorded_seed(options)
        self._build_model = build_model
        self._build(options.seed)
        warning = recorded_config.check_against_recorded(self.model.config, options.output_dir)
        if warning:
            self._say(warning)
        self.weights = None  # the Checkpoint the weights came from (None: fresh)
        self._restarts_left = 0
        self._restarting = False  # (a restart's train(): its record keeps the restarts)

    def _recorded_seed(self, options):
        """`options` with the seed recorded in WRITE_DIR/training_options.json when the run
        resumes from a training state (its data order and dropout go on as they began)."""
        write_dir = options.write_dir or options.output_dir
        state_dir = os.path.join(write_dir, training_states.TRAINING_STATE)
        latest = tf.train.latest_checkpoint(state_dir) if storage.isdir(state_dir) else None
        if latest is None or not self._holds_optimizer(latest):
            return options
        record = recorded_options.read(write_dir)
        recorded = record.get("seed")
        if recorded is None or int(recorded) == options.seed:
            return options
        how = "restarted" if record.get("restarts") else "started"
        self._say(f"resuming with --seed={recorded}, the seed this run {how} with; --seed={options.seed} applies "
                  "to new runs")
        return dataclasses.replace(options, seed=int(recorded))

    def _build(self, seed):
        """The model, built with `seed` (its initial weights and dropout seeds) under the strategy."""
        keras.utils.set_random_seed(seed)
        with self.strategy.scope():
            self.model = self._build_model()
            self.model.build()
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
        end, then exports `OUTPUT_DIR/model.ckpt-N`. Returns N. With `task.keep_best`, training
        ends early once the best evaluation is `patience` evaluations old (N is that step)."""
        run = self._prepare(task)
        with StopSignals(self.stream) as signals, self._naming_what_is_kept(run.manager):
            step = self._loop(task, run, signals)
        if run.best is not None and run.manager.latest_checkpoint:  # (the final state may precede the last eval)
            run.best.state_saved(training_states.step_of(run.manager.latest_checkpoint))
        if self.options.is_chief:
            prefix = checkpoints.save_tf1_checkpoint(self.model, os.path.join(self.write_dir, f"model.ckpt-{step}"))
            self._say(f"wrote {prefix}")
        return step

    def _prepare(self, task):
        """Everything a training run needs before its first step: the optimizer (with the bias
        correction the run started with), the step loop, the training state (resumed, or the
        starting weights loaded), the input from the state's position, progress and summaries,
        the eval history and the best checkpoint."""
        options, strategy = self.options, self.strategy
        # Before any step: a training state that cannot be saved would lose the steps before it.
        state_dir = os.path.join(self.write_dir, training_states.TRAINING_STATE)
        existed = storage.isdir(state_dir)
        storage.check_writable_dir(state_dir, "--output_dir")
        if not existed:  # (a run refused later, e.g. for its weights, leaves nothing behind)
            storage.rmtree(state_dir)
        else:
            _remove_unfinished_saves(state_dir)  # (a killed run's; one run per directory)
            for line in state_recovery.recover(state_dir):  # (the states on disk decide, not the index)
                self._say(f"warning: {line}")
        while True:  # (once more for each damaged newest state, set aside)
            latest = tf.train.latest_checkpoint(state_dir) if existed else None
            try:
                resuming = latest is not None and self._holds_optimizer(latest)
                bias_correction = self._adam_bias_correction(resuming)
                optimizer, loop, state, manager = self._training_objects(task, state_dir, bias_correction)
                self._start_training(state, manager)
                break
            except checkpoints.DamagedCheckpoint as error:
                if latest is None or error.prefix != latest:
                    raise
                self._say(f"warning: {state_recovery.set_aside_unreadable(state_dir, error)}")
        if not resuming:  # (once the starting weights are settled: a refused run records nothing)
            recorded_options.update(self.write_dir, adam_bias_correction=bias_correction, seed=options.seed,
                                    **({} if self._restarting else {"restarts": []}))
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
        best = self._best_checkpoint(task, resuming)
        return _Run(optimizer, loop, manager, iterator, writer, examples_per_step,
                    Progress(task.num_train_steps, examples_per_step, step, self.stream),
                    best, self._eval_history(task, step, best), bias_correction)

    def _training_objects(self, task, state_dir, bias_correction):
        """The optimizer, the step loop, the training state they make up and its manager."""
        options = self.options
        with self.strategy.scope():
            optimizer = create_optimizer(task.learning_rate, task.num_train_steps, task.num_warmup_steps,
                                         options.optimizer, options.weight_decay, bias_correction)
            loop = TrainLoop(self.strategy, self.model, optimizer, task.loss_fn, task.totals_fn,
                             task.metric_names, accumulation_steps=options.gradient_accumulation_steps,
                             loss_scaling=options.mixed_precision == "fp16", use_xla=options.use_xla)
        state = tf.train.Checkpoint(variables=training_states.named_variables(self.model),
                                    optimizer=optimizer, **loop.state())
        manager = tf.train.CheckpointManager(state, state_dir, max_to_keep=options.keep_checkpoint_max)
        return optimizer, loop, state, manager

    def _loop(self, task, run, signals):
        """The loops of steps to the end of training (or early stopping); returns the last step."""
        options = self.options
        step = int(run.optimizer.iterations.numpy())
        sizes, agreement = LoopSizes(options.iterations_per_loop), StopAgreement(self.strategy)
        # (every worker learns whether a resumed run had already stopped early: only the chief evaluates)
        _, attempts, finish = agreement.agreed(None, sizes.next(), run.best is not None and run.best.exhausted())
        while step < task.num_train_steps and not finish:
            attempts = min(attempts, self._next_boundary(task, step) - step)
            started = time.time()
            with tfrecords.naming_damaged_file(task.input_files, task.input_name, self._kept(run.manager),
                                               task.input_advice):
                metrics = run.loop.run_steps(run.iterator, attempts)
            diverged = bool(metrics.pop("diverged"))
            loss_sum = float(metrics.pop("loss_sum"))
            previous, step = step, int(run.optimizer.iterations.numpy())
            if diverged:
                raise self._diverged(step, metrics, run.manager, task)
            sizes.record(step - previous, time.time() - started)
            run.progress.update(step, metrics)
            if run.writer is not None:
                self._summaries(run.writer, step, metrics, run.optimizer, run.progress.steps_per_second,
                                run.examples_per_step)
            if step % options.save_checkpoints_steps == 0 or step >= task.num_train_steps:
                self._save(run.manager, step, run.best)
            if run.history is not None and task.periodic_eval.due(step, task.num_train_steps):
                self._evaluate_into(run.history, task.periodic_eval, step, run.best)
            if task.stuck is not None:
                task.stuck.observe_loss(previous, step, loss_sum)
                self._act_on_stuck(task, run.bias_correction)
            self._check_claim()
            finish = run.best is not None and run.best.exhausted()
            stop, attempts, finish = agreement.agreed(signals.received, sizes.next(), finish)
            if stop is not None:
                self._stop(stop, signals.received, step, run.manager)
        if finish:
            self._stop_early(step, run.manager, run.best)
        return step

    def train_restarting(self, make_task: Callable[[int], TrainingTask]) -> int:
        """`train(make_task(seed))`; with `on_stuck="restart"`, a run whose training loss shows
        it stuck (`training.stuck`) starts again from its initial weights with the next seed,
        at most `max_restarts` times (counted over the run's life: a resumed run keeps its count).
        Each restart is said, and recorded in WRITE_DIR/training_options.json."""
        while True:
            restarts = recorded_options.read(self.write_dir).get("restarts", [])
            self._restarts_left = self.options.max_restarts - len(restarts) if self.options.on_stuck == "restart" else 0
            try:
                return self.train(make_task(self.options.seed))
            except StuckRun as stuck:
                self._restart(stuck.verdict, restarts)

    def _next_boundary(self, task, step):
        """The step the next loop of steps must end at (or before): the next save, the end of
        training, the next evaluation, the stuck check's next window."""
        options = self.options
        boundary = min((step // options.save_checkpoints_steps + 1) * options.save_checkpoints_steps,
                       task.num_train_steps)
        if task.periodic_eval is not None:  # (every worker: loops stay the same size)
            boundary = min(boundary, task.periodic_eval.next_due(step, task.num_train_steps))
        if task.stuck is not None:
            boundary = min(boundary, task.stuck.next_boundary(step))
        return boundary

    def _adam_bias_correction(self, resuming):
        """Whether AdamW corrects its moments: the flag for a new run (recorded in
        WRITE_DIR/training_options.json); for a resumed one, what it started with (a training
        state without that record started without it, as every run did before the option)."""
        wanted = self.options.adam_bias_correction
        if not resuming:
            return wanted
        recorded = bool(recorded_options.read(self.write_dir).get("adam_bias_correction", False))
        if recorded != wanted and self.options.optimizer == "adamw":
            self._say(f"resuming with Adam bias correction {'on' if recorded else 'off'}, as this run started "
                      f"({os.path.join(self.write_dir, recorded_options.FILE_NAME)}); --adam_bias_correction="
                      f"{str(wanted).lower()} applies to new runs")
        return recorded

    def _best_checkpoint(self, task, resuming):
        """The chief's best checkpoint keeper when the task keeps one; a new run removes a
        best/ left by an earlier run of the directory."""
        if task.keep_best is None or task.periodic_eval is None or not self.options.is_chief:
            return None
        best = BestCheckpoint(self.options.output_dir, task.keep_best)
        if not resuming:
            best.start_fresh()
        return best

    def _save(self, manager, step, best):
        _save_state(manager, step)
        if best is not None:
            best.state_saved(step)

    def _act_on_stuck(self, task, bias_correction):
        """Restarts a stuck run (`StuckRun`) when it may, else one warning line."""
        verdict = task.stuck.verdict()
        if verdict is None:
            return
        if verdict.from_loss and self._restarts_left > 0:
            raise StuckRun(verdict)
        self._say(f"warning: this run looks stuck: {verdict.reason}; "
                  f"{advice(task.learning_rate, bias_correction)}")

    def _restart(self, verdict, restarts):
        """Puts the stuck run's files aside (OUTPUT_DIR/stuck_runs/seed-S/: its eval history and
        TensorBoard curves; its training states and best checkpoint are removed), records the
        restart and builds the model again with the next seed."""
        options = self.options
        seed = options.seed + 1
        self._say(f"stuck at step {verdict.step}: {verdict.reason}; starting again from the initial weights with "
                  f"--seed={seed} (restart {len(restarts) + 1} of at most {options.max_restarts})")
        storage.rmtree(os.path.join(self.write_dir, training_states.TRAINING_STATE))
        if options.is_chief:
            storage.rmtree(os.path.join(options.output_dir, "best"))
            aside = os.path.join(options.output_dir, "stuck_runs", f"seed-{options.seed}")
            storage.rmtree(aside)
            for name in ("train", "eval", "eval_history.jsonl"):
                path = os.path.join(options.output_dir, name)
                if storage.exists(path):
                    storage.makedirs(aside)
                    (storage.move_tree if storage.isdir(path) else storage.rename)(path, os.path.join(aside, name))
        restarts = [*restarts, {"seed": options.seed, "step": verdict.step, "reason": verdict.reason}]
        recorded_options.update(self.write_dir, seed=seed, restarts=restarts)
        self.options = dataclasses.replace(options, seed=seed)
        self._restarting = True
        self._build(seed)

    def _stop_early(self, step, manager, best):
        """Ends training at `step` (early stopping): a training state there, so that running
        the command again finds the run finished."""
        if manager.latest_checkpoint is None or training_states.step_of(manager.latest_checkpoint) != step:
            self._save(manager, step, best)
        if best is not None:
            self._say(f"early stopping at step {step}: {best.selection.metric} has not improved in "
                      f"{best.since_best} evaluations (best: {best.describe()})")
        else:
            self._say(f"early stopping at step {step} (decided by the chief)")

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

    def _eval_history(self, task, step, best=None):
        """The chief's eval history when the task evaluates periodically, trimmed to the step
        training resumes from (and the best checkpoint rebuilt from it), with the point due at
        that step written if it is missing."""
        if task.periodic_eval is None or not self.options.is_chief:
            return None
        history = EvalHistory(self.options.output_dir)
        history.resume_at(step)
        if best is not None:
            best.resume_at(step, history.points)
        if task.periodic_eval.due(step, task.num_train_steps) and not history.has(step):
            self._evaluate_into(history, task.periodic_eval, step, best)
        return history

    def _evaluate_into(self, history, periodic_eval, step, best=None):
        """One evaluation: the best checkpoint first (when it is the best), then the history."""
        result = periodic_eval.evaluate(step)
        improved = best is not None and best.consider(step, result, self.model)
        history.add(step, result)
        self._say(f"eval at step {step}: {periodic_eval.line(result)}{' (best so far)' if improved else ''}")

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
    def restore_for_inference(self, prefer_best: bool = False) -> int:
        """Loads the weights the policy chooses for an eval/predict-only run (every weight of
        the model must be there); returns their step. A one-line error when there are none.
        `prefer_best`: the run's best checkpoint (OUTPUT_DIR/best/) when it kept one."""
        if prefer_best and best_checkpoint.read_record(self.options.output_dir) is not None:
            return self.use_best()
        found = training_states.choose_weights(self.options.output_dir, self.options.init_checkpoint,
                                             training=False)
        report = training_states.load_weights(self.model, found, strict=True)
        self.weights = found
        self._describe_weights(found, report)
        return found.step

    def use_best(self, last_step: int | None = None) -> int:
        """Loads the run's best checkpoint (OUTPUT_DIR/best/, `training.best_checkpoint`) when it
        kept one, saying which step it is; returns the step of the weights the model now holds
        (`last_step`, the weights training ended with, when there is no best)."""
        record = best_checkpoint.read_record(self.options.output_dir)
        if record is None:
            return last_step
        step = int(record["step"])
        found = training_states.Checkpoint(best_checkpoint.checkpoint_prefix(self.options.output_dir, step),
                                           training_states.TF1_KIND, step)
        training_states.load_weights(self.model, found, strict=True)
        self.weights = found
        ended = "" if last_step is None else f"; training ended at step {last_step}"
        self._say(f"weights: the best checkpoint {found.prefix} ({record['metric']} {record['value']:.4f} at "
                  f"step {step}{ended})")
        return step

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

    @property
    def prediction_traces(self) -> int:
        """How many times the prediction steps were traced (each `fn` once per input spec)."""
        return sum(step.experimental_get_tracing_count() for step in self._predict_steps.values())

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
    """Saves the training state of `step`, flushed to the disk; a save that fails (a full disk)
    leaves no partial files behind. (TensorFlow writes the index naming it just before the
    flush: a power loss between leaves an index naming a state that may be damaged, which the
    next run sets aside, resuming from the previous one.)"""
    try:
        manager.save(checkpoint_number=step)
        if storage.is_local(manager.directory):  # (elsewhere a file is stored when it is closed)
            for path in [*storage.glob(os.path.join(manager.directory, f"ckpt-{step}.*")),
                         os.path.join(manager.directory, "checkpoint")]:
                storage.sync(path)
            storage.sync(manager.directory)
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
