"""The one training driver: what every training script (and any new task) hands its model and
task definition to.

    driver = Driver(strategy, lambda: modeling.BertClassifier(config, 2), RunOptions(output_dir=...))
    driver.train(TrainingTask(loss_fn, totals_fn, ("loss",), batch_size=32, dataset_fn=...,
                              learning_rate=2e-5, num_train_steps=1000, num_warmup_steps=100))
    step = driver.restore_for_inference()       # eval/predict-only runs
    outputs = driver.predict(dataset, logits)   # logits(model, features) -> {"logits": ...}

It owns the strategy scope, the optimizer, which weights to start from (`training.weights`; the policy is
`checkpoints.training_states`'), resume, the step loop (`TrainLoop.run_steps`: loops of steps sized by time, at
most `iterations_per_loop`), progress output, TensorBoard summaries, training-state checkpoints, the config
recorded in the output directory (`training.recorded_config`), the final `model.ckpt-N` export, predictions
under the strategy, and the one-line endings of a run that diverges (`Diverged`) or meets a damaged input record.

Resume is exact: the training state holds the weights, the optimizer, the loss scale and the input position; the
input is a pure function of its position (`dataset_fn(start)`), and dropout and PLD draws are a function of the
step (`modeling.randomness`). A run killed after a checkpoint and restarted with the same flags ends with the
weights of the uninterrupted run.
"""

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable

import keras
import tensorflow as tf

from bert_realformer import checkpoints, report, run_claim, storage, tfrecords
from bert_realformer.checkpoints import state_recovery, training_states
from bert_realformer.training import adversarial, best_checkpoint, layerwise, recorded_config, recorded_options, weights
from bert_realformer.training.averaging import WeightAverages
from bert_realformer.training.best_checkpoint import BestCheckpoint
from bert_realformer.training.definitions import RunOptions, TrainingTask
from bert_realformer.training.distribution import check_workers_agree, dtype_policy
from bert_realformer.training.eval_history import EvalHistory
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.prediction import PredictFn, Predictor
from bert_realformer.training.preemption import StopAgreement, StopSignals
from bert_realformer.training.progress import LoopSizes, Progress, write_summaries
from bert_realformer.training.restarts import RestartDeadline, StuckRun, act_on_verdict, restart_line, set_aside
from bert_realformer.training.state_saving import (
    divergence_error,
    naming_what_is_kept,
    remove_unfinished_saves,
    save_state,
    stop_with_state,
    what_is_kept,
)
from bert_realformer.training.trainer import TrainLoop, distributed_input
from bert_realformer.training.watch_state import WatchVariables

__all__ = ["Driver", "RunOptions", "StuckRun", "TrainingTask"]


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
    deadline: RestartDeadline


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
            self._say(warning)
        self.weights = None  # the Checkpoint the weights came from (None: fresh)
        self._restarts_left = 0
        self._restarting = False  # (a restart's train(): its record keeps the restarts)
        self._averages = None  # (a training run's `WeightAverages`, when it keeps them)
        self._watch = None  # (a training run's `watch_state.WatchVariables`, when it has a stuck check)

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
        self._say(*([line] if line else []))
        return dataclasses.replace(options, seed=seed)

    def _build(self, seed):
        """The model, built under the strategy and the run's dtype policy; with `seed_globally`,
        after seeding the process with `seed` (its initial weights and dropout seeds)."""
        if self.options.seed_globally:
            keras.utils.set_random_seed(seed)
        with self.strategy.scope(), dtype_policy(self.options.mixed_precision):
            self.model = self._build_model()
            self.model.build()
        self.predictor = Predictor(self.strategy, self.model, xla=self.options.xla_prediction,
                                   int8=self.options.quantize == "int8", lite=self.options.tflite_prediction)
        self.trim = self.predictor.trim  # what tasks map over batches of dynamic padding (`Predictor.trim`)

    def _say(self, *lines):
        for line in lines:
            report.say(line, self.stream)

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
        with StopSignals(self.stream) as signals, naming_what_is_kept(run.manager):
            step = self._loop(task, run, signals)
        if run.best is not None and run.manager.latest_checkpoint:  # (the final state may precede the last eval)
            run.best.state_saved(training_states.step_of(run.manager.latest_checkpoint))
        if self._averages is not None:
            with self.strategy.scope():
                self._averages.assign_to_model()
            self._say(f"weights: their moving averages (decay {self._averages.decay:g}) from here on")
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
        storage.check_writable_dir(state_dir, "output_dir")
        if not existed:  # (a run refused later, e.g. for its weights, leaves nothing behind)
            storage.rmtree(state_dir)
        else:
            remove_unfinished_saves(state_dir)  # (a killed run's; one run per directory)
            for line in state_recovery.recover(state_dir):  # (the states on disk decide, not the index)
                self._say(f"warning: {line}")
        while True:  # (once more for each damaged newest state, set aside)
            latest = tf.train.latest_checkpoint(state_dir) if existed else None
            try:
                resuming = latest is not None and weights.holds_optimizer(latest)
                bias_correction, ema_decay = self._resumed_options(resuming)
                optimizer, loop, state, manager = self._training_objects(task, state_dir, bias_correction, ema_decay,
                                                                         latest if resuming else None)
                self._start_training(state, manager, resuming)
                break
            except checkpoints.DamagedCheckpoint as error:
                if latest is None or error.prefix != latest:
                    raise
                self._say(f"warning: {state_recovery.set_aside_unreadable(state_dir, error)}")
        if not resuming:  # (once the starting weights are settled: a refused run records nothing)
            recorded_options.update(self.write_dir, adam_bias_correction=bias_correction, seed=options.seed,
                                    ema_decay=ema_decay, stuck=None,
                                    **({} if self._restarting else {"restarts": []}))
        if options.is_chief:
            recorded_config.record(self.model.config, options.output_dir)
        step = int(optimizer.iterations.numpy())
        check_workers_agree(self.strategy, step)
        position = int(loop.input_position.numpy())
        iterator = iter(distributed_input(strategy, lambda: task.dataset_fn(position), task.batch_size,
                                          options.gradient_accumulation_steps))
        writer = tf.summary.create_file_writer(os.path.join(self.write_dir, "train")) if options.is_chief else None
        examples_per_step = task.batch_size * options.gradient_accumulation_steps
        best = None  # (the chief keeps the best checkpoint when the task evaluates and keeps one)
        if task.keep_best is not None and task.periodic_eval is not None and options.is_chief:
            best = BestCheckpoint.for_run(options.output_dir, task.keep_best, resuming)
        return _Run(optimizer, loop, manager, iterator, writer, examples_per_step,
                    Progress(task.num_train_steps, examples_per_step, step, self.stream),
                    best, self._eval_history(task, step, best), bias_correction,
                    RestartDeadline(options.restart_deadline, step))

    def _training_objects(self, task, state_dir, bias_correction, ema_decay, resumed_from):
        """The optimizer, the step loop, the training state they make up (with the stuck check's
        windows unless `resumed_from`, a training state, has none) and its manager."""
        options = self.options
        with self.strategy.scope():
            optimizer = create_optimizer(task.learning_rate, task.num_train_steps, task.num_warmup_steps,
                                         options.optimizer, options.weight_decay, bias_correction,
                                         layerwise.learning_rate_multipliers(self.model, options.layerwise_lr_decay))
            self._averages = WeightAverages(self.model, ema_decay) if ema_decay else None
            loss_fn = adversarial.wrapped(task.loss_fn, options.adversary)
            self._say(*([options.adversary.describe()] if options.adversary else []))
            loop = TrainLoop(self.strategy, self.model, optimizer, loss_fn, task.totals_fn,
                             task.metric_names, accumulation_steps=options.gradient_accumulation_steps,
                             loss_scaling=options.mixed_precision == "fp16", use_xla=options.use_xla,
                             averages=self._averages)
            self._watch = WatchVariables.for_training_state(task.stuck, resumed_from)
        watch = {} if self._watch is None else {WatchVariables.NAME: self._watch}
        averages = {} if self._averages is None else {"averages": self._averages.averages}
        state = tf.train.Checkpoint(variables=training_states.named_variables(self.model),
                                    optimizer=optimizer, **loop.state(), **averages, **watch)
        manager = tf.train.CheckpointManager(state, state_dir, max_to_keep=options.keep_checkpoint_max)
        return optimizer, loop, state, manager

    def _loop(self, task, run, signals):
        """The loops of steps to the end of training (or early stopping); returns the last step."""
        options = self.options
        step = int(run.optimizer.iterations.numpy())
        sizes, agreement = LoopSizes(options.iterations_per_loop), StopAgreement(self.strategy)
        # (every worker learns whether a resumed run had already stopped early: only the chief evaluates)
        _, attempts, finish = agreement.agreed(None, sizes.next(), run.best is not None and run.best.exhausted())
        self._act_on_stuck(task, run, step)  # (a resumed run's verdict, found before the kill)
        while step < task.num_train_steps and not finish:
            attempts = min(attempts, task.next_boundary(step, options.save_checkpoints_steps) - step)
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
            if task.stuck is not None:  # (before the save, which holds the watch's windows)
                task.stuck.observe_loss(previous, step, loss_sum)
            sizes.record(step - previous, time.time() - started)
            run.progress.update(step, metrics)
            if run.writer is not None:
                write_summaries(run.writer, step, metrics, run.optimizer.learning_rate,
                                run.progress.steps_per_second, run.examples_per_step)
            if step % options.save_checkpoints_steps == 0 or step >= task.num_train_steps:
                self._save(run.manager, step, run.best)
            if run.history is not None and task.periodic_eval.due(step, task.num_train_steps):
                self._evaluate_into(run.history, task.periodic_eval, step, run.best)
            self._act_on_stuck(task, run, step)
            if self.claim is not None:
                self.claim.check_held()
            finish = run.best is not None and run.best.exhausted()
            stop, attempts, finish = agreement.agreed(signals.received, sizes.next(), finish)
            if stop is not None:
                stop_with_state(stop, signals.received, step, run.manager)
        if finish:
            self._stop_early(step, run.manager, run.best)
        return step

    def train_restarting(self, make_task: Callable[[int], TrainingTask]) -> int:
        """`train(make_task(seed))`; with `on_stuck="restart"`, a run whose training loss shows
        it stuck (`training.stuck`) starts again from its initial weights with the next seed, at most
        `max_restarts` times (over the run's life: a resumed run keeps its count) and not past
        `restart_deadline`. Each restart is said, and recorded in WRITE_DIR/training_options.json."""
        while True:
            restarts = recorded_options.read(self.write_dir).get("restarts", [])
            self._restarts_left = self.options.max_restarts - len(restarts) if self.options.on_stuck == "restart" else 0
            try:
                return self.train(make_task(self.options.seed))
            except StuckRun as stuck:
                self._restart(stuck.verdict, restarts)

    def _resumed_options(self, resuming):
        """(AdamW's bias correction, the averages' decay): the options', or as a resumed run started."""
        if not resuming:
            return self.options.adam_bias_correction, self.options.ema_decay
        values, lines = recorded_options.resumed(self.write_dir, self.options)
        self._say(*lines)
        return values

    def _save(self, manager, step, best):
        if self._watch is not None:
            self._watch.before_save()
        save_state(manager, step)
        if best is not None:
            best.state_saved(step)

    def _act_on_stuck(self, task, run, step):
        act_on_verdict(task.stuck, self._restarts_left, self.write_dir, task.learning_rate, run.bias_correction,
                       self._say, run.deadline.refusal(step, task.num_train_steps), self.options.on_stuck == "restart")

    def _restart(self, verdict, restarts):
        """Sets the stuck run aside (`restarts.set_aside`) and builds the model with the next seed."""
        options, seed = self.options, self.options.seed + 1
        self._say(restart_line(verdict, seed, restarts, options.max_restarts))
        set_aside(options.output_dir, self.write_dir, options.seed, options.is_chief, verdict, restarts)
        self.options = dataclasses.replace(options, seed=seed)
        self._restarting = True
        self._build(seed)

    def _stop_early(self, step, manager, best):
        """Ends training at `step` (early stopping): a training state there, so that running
        the command again finds the run finished."""
        if manager.latest_checkpoint is None or training_states.step_of(manager.latest_checkpoint) != step:
            self._save(manager, step, best)
        self._say(best_checkpoint.early_stopping_line(step, best))

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
        with contextlib.nullcontext() if self._averages is None else self._averages.swapped_in():
            result = periodic_eval.evaluate(step)
            improved = best is not None and best.consider(step, result, self.model)
        history.add(step, result)
        self._say(f"eval at step {step}: {periodic_eval.line(result)}{' (best so far)' if improved else ''}")

    def _start_training(self, state, manager, resuming):
        """Resumes from this run's training state, else sets the starting weights (`weights.for_training`),
        where the weight averages start."""
        options = self.options
        with self.strategy.scope():  # (a re-initialised weight is set on every replica)
            self.weights, lines = weights.for_training(self.model, state, manager, options.output_dir,
                                                       options.init_checkpoint, options.reinit_top_layers, options.seed)
            if self._averages is not None and not resuming:
                self._averages.reset()
        if self._watch is not None and resuming:
            self._watch.after_restore()
        self._say(*lines)

    # ------------------------------------------------------------------ eval / predict
    def restore_for_inference(self, prefer_best: bool = False) -> int:
        """Loads the weights the policy chooses for an eval/predict-only run (every weight of
        the model must be there); returns their step. A one-line error when there are none.
        `prefer_best`: the run's best checkpoint (OUTPUT_DIR/best/) when it kept one."""
        if prefer_best and best_checkpoint.read_record(self.options.output_dir) is not None:
            return self.use_best()
        self.weights, lines = weights.for_inference(self.model, self.options.output_dir, self.options.init_checkpoint)
        self._say(*lines)
        return self.weights.step

    def use_best(self, last_step: int | None = None) -> int:
        """Loads the run's best checkpoint (OUTPUT_DIR/best/, `training.best_checkpoint`) when it
        kept one, saying which step it is; returns the step of the weights the model now holds
        (`last_step`, the weights training ended with, when there is no best)."""
        found, lines = weights.best(self.model, self.options.output_dir, last_step)
        if found is None:
            return last_step
        self.weights = found
        self._say(*lines)
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
