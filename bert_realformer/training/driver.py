"""The one training driver: what every training script (and any new task) hands its model and
task definition to.

    driver = Driver(strategy, lambda: modeling.BertClassifier(config, 2), RunOptions(output_dir=...))
    driver.train(TrainingTask(loss_fn, totals_fn, dataset_fn, batch_size=32, learning_rate=2e-5,
                              num_train_steps=1000, num_warmup_steps=100), hooks=[...])
    step = driver.restore_for_inference()       # eval/predict-only runs
    outputs = driver.predict(dataset, logits)   # logits(model, features) -> {"logits": ...}

It owns the strategy scope, the optimizer, which weights to start from (`training.weights`; the
policy is `checkpoints.training_states`'), resume, the loop of steps (`TrainLoop.run_steps`: loops
sized by time, at most `iterations_per_loop`), progress and TensorBoard summaries, training-state
checkpoints, the config recorded in the output directory (`training.recorded_config`), the final
`model.ckpt-N`, predictions under the strategy, and the one-line endings of a run that diverges
(`Diverged`), is stopped by a signal, or meets a damaged input record. Everything else a run does
is a hook's (`training.hooks`): evaluations during training, the best checkpoint and early
stopping, the stuck check, weight averages, adversarial training, layer-wise rates.

Resume is exact: the training state holds the weights, the optimizer, the loss scale, the input
position and what the hooks add; the input is a pure function of its position
(`dataset_fn(start)`), and dropout and PLD draws are a function of the step
(`modeling.randomness`). A run killed after a checkpoint and restarted with the same flags ends
with the weights of the uninterrupted run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from bert_realformer import checkpoints, console, run_claim, storage, tfrecords
from bert_realformer.checkpoints import state_recovery, training_states
from bert_realformer.inference.engines import PredictFn
from bert_realformer.inference.predictor import Predictor
from bert_realformer.training import recorded_config, recorded_options, weights
from bert_realformer.training.distribution import check_workers_agree, dtype_policy, this_worker
from bert_realformer.training.hooks import HookRun, TrainingHook
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.preemption import StopAgreement, StopSignals
from bert_realformer.training.progress import LoopSizes, Progress, write_summaries
from bert_realformer.training.state_saving import (
    divergence_error,
    naming_what_is_kept,
    remove_unfinished_saves,
    save_state,
    stop_with_state,
    what_is_kept,
)
from bert_realformer.training.trainer import LossFn, TotalsFn, TrainLoop, distributed_input


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a run trains and predicts, whatever the task (the scripts' shared flags,
    `commandline.training_flags.run_options`)."""
    output_dir: str
    init_checkpoint: str | None = None
    seed: int = 12345
    mixed_precision: str = "none"          # none | bf16 | fp16 (dynamic loss scaling)
    use_xla: bool = False
    prediction_engine: str = "graph"       # how prediction, evaluation and the export run (`inference.engines`)
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
    keep_recorded_seed: bool = False       # a resumed run takes the seed it started (or restarted) with
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
    summary: str = ""                   # what it trains on, for the user ("2,000 examples, 2,340 windows")


@dataclasses.dataclass
class _Run:
    """What one `Driver.train` call works with (`Driver._prepare`)."""
    hooks: Sequence[TrainingHook]
    context: HookRun
    optimizer: keras.optimizers.Optimizer
    loop: TrainLoop
    state: tf.train.Checkpoint
    manager: tf.train.CheckpointManager
    iterator: object = None
    writer: object = None
    examples_per_step: int = 0
    progress: Progress | None = None


class Driver:
    """Builds the model (under the strategy and the dtype policy; seeded when the options ask)
    and runs it. The process's Keras dtype policy is left as it was.

    Args:
      strategy: a `tf.distribute` strategy (`training.distribution.make_strategy`).
      build_model: `() -> keras.Model`, a model with TF1 names (`modeling.tf1_variable_map`).
      options: `RunOptions`.
      stream: where progress and the weights line go (stderr).
    """

    def __init__(self, strategy: tf.distribute.Strategy, build_model: Callable[[], keras.Model],
                 options: RunOptions, stream=None):
        self.strategy, self.options, self.stream = strategy, options, stream or sys.stderr
        storage.makedirs(options.output_dir)
        self.claim = run_claim.claim(options.output_dir) if options.claim_output_dir else None
        try:  # (claimed first: a second run stops at once; a refusal below has no `with` to release it)
            if options.keep_recorded_seed:
                self.options = options = self._recorded_seed(options)
            self._build_model = build_model
            self._build(options.seed)
        except BaseException:
            self.close()
            raise
        warning = recorded_config.check_against_recorded(self.model.config, options.output_dir)
        if warning:
            self.say(warning)
        self.weights = None  # the Checkpoint the weights came from (None: fresh)

    def close(self) -> None:
        """Releases the output directory's claim (a training run's), whatever way the run ends."""
        if self.claim is not None:
            self.claim.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _recorded_seed(self, options):
        """`options` with the seed recorded when the run resumes from a training state."""
        write_dir = options.write_dir or options.output_dir
        state_dir = os.path.join(write_dir, training_states.TRAINING_STATE)
        latest = tf.train.latest_checkpoint(state_dir) if storage.isdir(state_dir) else None
        if latest is None or not weights.holds_optimizer(latest):
            return options
        seed, line = recorded_options.resumed_seed(write_dir, options.seed)
        self.say(*([line] if line else []))
        return dataclasses.replace(options, seed=seed)

    def _build(self, seed):
        """The model, built under the strategy and the run's dtype policy; with `seed_globally`,
        after seeding the process with `seed` (its initial weights and dropout seeds)."""
        if self.options.seed_globally:
            keras.utils.set_random_seed(seed)
        with self.strategy.scope(), dtype_policy(self.options.mixed_precision):
            self.model = self._build_model()
            if not self.model.built:  # (a model adapted with LoRA comes built)
                self.model.build()
        self.predictor = Predictor(self.strategy, self.model, self.options.prediction_engine)
        self.trim = self.predictor.trim  # what tasks map over batches of dynamic padding (`Predictor.trim`)

    def restart(self, seed: int) -> None:
        """Starts over with `seed`: the model built again (its initial weights and dropout from
        that seed); the next `train` starts from the starting weights (a stuck run's restart)."""
        self.options = dataclasses.replace(self.options, seed=seed)
        self._build(seed)

    def say(self, *lines: str) -> None:
        """Lines for the user, on the driver's stream."""
        for line in lines:
            console.say(line, self.stream)

    @property
    def write_dir(self):
        return self.options.write_dir or self.options.output_dir

    # ------------------------------------------------------------------ training
    def train(self, task: TrainingTask, hooks: Sequence[TrainingHook] = ()) -> int:
        """Trains to `task.num_train_steps` (resuming when the output directory holds a training
        state), saving the training state every `save_checkpoints_steps` and at the end, then
        exports `OUTPUT_DIR/model.ckpt-N`. Returns N. A hook may end training early (N is that
        step) or end the run by raising (`at_step`)."""
        run = self._prepare(task, hooks)
        with StopSignals(self.stream) as signals, naming_what_is_kept(run.manager):
            step = self._loop(task, run, signals)
        for hook in run.hooks:
            self.say(*hook.on_train_end(run.context, step))
        if self.options.is_chief:
            prefix = checkpoints.save_tf1_checkpoint(self.model, os.path.join(self.write_dir, f"model.ckpt-{step}"))
            self.say(f"wrote {prefix}")
        return step

    def _prepare(self, task, hooks):
        """Everything a training run needs before its first step: the optimizer (with the bias
        correction the run started with), the step loop, the training state (resumed, or the
        starting weights loaded), the record of the run's options, the input from the state's
        position, progress and summaries; then the hooks' `on_train_begin`."""
        options, strategy = self.options, self.strategy
        # Before any step: a training state that cannot be saved would lose the steps before it.
        state_dir = os.path.join(self.write_dir, training_states.TRAINING_STATE)
        existed = storage.isdir(state_dir)
        storage.check_writable_dir(state_dir, "output_dir")
        if not existed:  # (a run refused later, e.g. for its weights, leaves nothing behind)
            storage.rmtree(state_dir)
        else:
            remove_unfinished_saves(state_dir)  # (a killed run's; one run per directory)
            for line in state_recovery.recover(state_dir):  # (the states on disk decide, not the index)
                self.say(f"warning: {line}")
        while True:  # (once more for each damaged newest state, set aside)
            latest = tf.train.latest_checkpoint(state_dir) if existed else None
            try:
                resuming = latest is not None and weights.holds_optimizer(latest)
                context = HookRun(self, task, tuple(hooks), resuming, self._bias_correction(resuming))
                run = self._training_objects(task, context, state_dir, latest if resuming else None)
                self._start_training(run)
                break
            except checkpoints.DamagedCheckpoint as error:
                if latest is None or error.prefix != latest:
                    raise
                self.say(f"warning: {state_recovery.set_aside_unreadable(state_dir, error)}")
        if not resuming:  # (once the starting weights are settled: a refused run records nothing)
            recorded = {"adam_bias_correction": context.bias_correction, "seed": options.seed}
            for hook in run.hooks:
                recorded.update(hook.recorded_options(context))
            recorded_options.update(self.write_dir, **recorded)
        if options.is_chief:
            recorded_config.record(self.model.config, options.output_dir)
        step = context.first_step
        check_workers_agree(self.strategy, step)
        position = int(run.loop.input_position.numpy())
        run.iterator = iter(distributed_input(strategy, lambda: task.dataset_fn(position), task.batch_size,
                                              options.gradient_accumulation_steps))
        run.writer = tf.summary.create_file_writer(os.path.join(self.write_dir, "train")) if options.is_chief else None
        run.examples_per_step = task.batch_size * options.gradient_accumulation_steps
        run.progress = Progress(task.num_train_steps, run.examples_per_step, step, self.stream)
        for hook in run.hooks:
            hook.on_train_begin(context)
        return run

    def _bias_correction(self, resuming):
        """AdamW's bias correction: the options', or as a resumed run started."""
        if not resuming:
            return self.options.adam_bias_correction
        correction, line = recorded_options.resumed_bias_correction(
            self.write_dir, self.options.adam_bias_correction, self.options.optimizer)
        self.say(*([line] if line else []))
        return correction

    def _training_objects(self, task, context, state_dir, resumed_from):
        """The optimizer, the step loop and the training state they make up, with what the hooks
        add to it (`resumed_from`: the training state a run resumes from, else None)."""
        options, hooks = self.options, context.hooks
        with self.strategy.scope():
            optimizer = create_optimizer(task.learning_rate, task.num_train_steps, task.num_warmup_steps,
                                         options.optimizer, options.weight_decay, context.bias_correction,
                                         _multipliers(hook.learning_rate_multipliers(context) for hook in hooks))
            added = {}
            for hook in hooks:
                added.update(hook.state_variables(context, resumed_from))
            loss_fn = task.loss_fn
            for hook in hooks:
                loss_fn = hook.wrap_loss(context, loss_fn)
            loop = TrainLoop(self.strategy, self.model, optimizer, loss_fn, task.totals_fn,
                             task.metric_names, accumulation_steps=options.gradient_accumulation_steps,
                             loss_scaling=options.mixed_precision == "fp16", use_xla=options.use_xla,
                             after_update=[lambda applied, hook=hook: hook.after_update(context, applied)
                                           for hook in hooks])
        state = tf.train.Checkpoint(variables=training_states.named_variables(self.model),
                                    optimizer=optimizer, **loop.state(), **added)
        manager = tf.train.CheckpointManager(state, state_dir, max_to_keep=options.keep_checkpoint_max)
        context.latest_saved_step = lambda: (training_states.step_of(manager.latest_checkpoint)
                                             if manager.latest_checkpoint else None)
        return _Run(hooks, context, optimizer, loop, state, manager)

    def _start_training(self, run):
        """Resumes from this run's training state, else sets the starting weights (`weights.for_training`);
        then the hooks' `on_weights_set` (under the strategy's scope: a weight set is set on every replica)."""
        options, context = self.options, run.context
        with self.strategy.scope():
            self.weights, lines = weights.for_training(self.model, run.state, run.manager, options.output_dir,
                                                       options.init_checkpoint)
            context.first_step = int(run.optimizer.iterations.numpy())
            for hook in run.hooks:
                lines += hook.on_weights_set(context)
        self.say(*lines)

    def _loop(self, task, run, signals):
        """The loops of steps to the end of training (or an early stop); returns the last step."""
        options, context = self.options, run.context
        step = context.first_step
        sizes, agreement = LoopSizes(options.iterations_per_loop), StopAgreement(self.strategy)
        self._at_step(run, step)  # (the evaluation due where training starts; a resumed run's verdicts)
        # (every worker learns whether a resumed run had already stopped early: only the chief evaluates)
        _, attempts, finish = agreement.agreed(None, sizes.next(), self._stop_reason(run, step) is not None)
        while step < task.num_train_steps and not finish:
            attempts = min(attempts, self._next_boundary(task, run, step) - step)
            started = time.time()
            with tfrecords.naming_damaged_file(task.input_files, task.input_option or task.input_name,
                                               f"; {what_is_kept(run.manager)}", task.input_advice,
                                               options=(task.input_option,) if task.input_option else ()):
                metrics = run.loop.run_steps(run.iterator, attempts)
            diverged = bool(metrics.pop("diverged"))
            loss_sum = float(metrics.pop("loss_sum"))
            previous, step = step, int(run.optimizer.iterations.numpy())
            if diverged:
                raise divergence_error(step, metrics, run.manager, task.learning_rate)
            for hook in run.hooks:  # (before the save, which holds what the hooks add)
                hook.after_steps(context, previous, step, {**metrics, "loss_sum": loss_sum})
            sizes.record(step - previous, time.time() - started)
            run.progress.update(step, metrics)
            if run.writer is not None:
                write_summaries(run.writer, step, metrics, run.optimizer.learning_rate,
                                run.progress.steps_per_second, run.examples_per_step)
            if step % options.save_checkpoints_steps == 0 or step >= task.num_train_steps:
                self._save(run, step)
            self._at_step_keeping_steps(run, step)
            if self.claim is not None:
                self.claim.check_held()
            finish = self._stop_reason(run, step) is not None
            stop, attempts, finish = agreement.agreed(signals.received, sizes.next(), finish)
            if stop is not None:
                stop_with_state(stop, signals.received, step, run.manager)
        if finish:
            self._stop_early(run, step)
        return step

    def _next_boundary(self, task, run, step):
        """The step the loop of steps from `step` must end at (or before): the next save, the end
        of training, and each hook's boundary (the same on every worker: loops stay the same size)."""
        boundary = min((step // self.options.save_checkpoints_steps + 1) * self.options.save_checkpoints_steps,
                       task.num_train_steps)
        for hook in run.hooks:
            wanted = hook.next_boundary(run.context, step)
            if wanted is not None and wanted > step:
                boundary = min(boundary, wanted)
        return boundary

    def _at_step(self, run, step):
        for hook in run.hooks:
            hook.at_step(run.context, step)

    def _at_step_keeping_steps(self, run, step):
        """The hooks' `at_step`; one that fails writing or reading a file (a best checkpoint that
        cannot be written) ends the run after the training state of `step` is saved, where this
        worker can save alone, so that the steps since the last save are not lost (the failed
        evaluation runs again on resuming). A save that fails too leaves the earlier state, as any
        failed save does."""
        try:
            self._at_step(run, step)
        except (OSError, tf.errors.OpError):
            saved = run.manager.latest_checkpoint
            if this_worker(self.strategy)[0] == 1 and (saved is None or training_states.step_of(saved) != step):
                with contextlib.suppress(Exception):
                    self._save(run, step)
            raise

    def _stop_reason(self, run, step):
        return next((reason for hook in run.hooks if (reason := hook.stop_reason(run.context, step))), None)

    def _save(self, run, step):
        for hook in run.hooks:
            hook.before_save(run.context, step)
        save_state(run.manager, step)
        for hook in run.hooks:
            hook.after_save(run.context, step)

    def _stop_early(self, run, step):
        """Ends training at `step` (a hook asked: early stopping): a training state there, so that
        running the command again finds the run finished."""
        if run.manager.latest_checkpoint is None or training_states.step_of(run.manager.latest_checkpoint) != step:
            self._save(run, step)
        self.say(self._stop_reason(run, step) or f"early stopping at step {step} (decided by the chief)")

    # ------------------------------------------------------------------ eval / predict
    def restore_for_inference(self) -> int:
        """Loads the weights the policy chooses for an eval/predict-only run (every weight of
        the model must be there); returns their step. A one-line error when there are none."""
        return self.use_weights(*weights.for_inference(self.model, self.options.output_dir,
                                                       self.options.init_checkpoint))

    def use_weights(self, found: training_states.Checkpoint, lines: Sequence[str]) -> int:
        """Records that the model now holds the weights of `found` (loaded by the caller: another
        checkpoint than the policy's, such as a run's best), saying `lines`; returns their step."""
        self.weights = found
        self.say(*lines)
        return found.step

    def predict(self, dataset: tf.data.Dataset, fn: PredictFn) -> dict:
        """`fn(model, features) -> {name: [B, ...] tensor}` over every batch of `dataset` with the
        model's current weights: {name: numpy array} in the dataset's order (`Predictor`: traced
        once per `fn` and input spec)."""
        return self.predictor.predict(dataset, fn)

    @property
    def prediction_traces(self) -> int:
        """How many times the prediction steps were traced (each `fn` once per input spec)."""
        return self.predictor.traces


def _multipliers(per_hook):
    """The learning-rate multipliers the hooks ask for, multiplied together (None: none)."""
    chosen = [multipliers for multipliers in per_hook if multipliers is not None]
    if not chosen:
        return None
    return [float(math.prod(values)) for values in zip(*chosen)]
