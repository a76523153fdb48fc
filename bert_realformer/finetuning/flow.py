"""The one fine-tuning flow, the same for every task (`finetuning.contract.FinetuningTask`): read the
splits the plan asks for, train with the plan's hooks (`training_hooks`: dev-set evaluations every N
steps with the best checkpoint kept and early stopping, the stuck check and restarts, weight
averages, adversarial training, layer-wise rates, LoRA) or load the weights of an earlier run, evaluate
the dev set into eval_results.txt, predict the test set, export.

    plan = Plan(do_train=True, do_eval=True, schedule=Schedule(32, 2e-5, 3.0, seed=12345))
    flow.run(task, plan, make_driver)   # make_driver(build_model) -> (driver, tokenizer)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from bert_realformer import console, storage
from bert_realformer.checkpoints.files_beside import check_vocabulary_belongs
from bert_realformer.errors import InputError
from bert_realformer.finetuning.adversarial import AdversarialTraining, Adversary
from bert_realformer.finetuning.averaging import MovingAverages
from bert_realformer.finetuning.best_checkpoint import KeepBest, Selection, load_best
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, best_metric
from bert_realformer.finetuning.layerwise import LayerwiseTraining
from bert_realformer.finetuning.low_rank_adaptation import Lora, LowRankAdaptation, adapted
from bert_realformer.finetuning.restarts import Attempt, StuckCheck, restart_deadline_for, train_restarting
from bert_realformer.finetuning.schedule import Schedule
from bert_realformer.finetuning.stuck import StuckWatch, constant_prediction
from bert_realformer.training import recorded_options
from bert_realformer.training.driver import Driver, RunOptions
from bert_realformer.training.evaluation import PeriodicEval, write_eval_results
from bert_realformer.training.setup import (
    StrategySpec,
    check_batches_fit,
    checked_tokenizer,
    for_worker,
    load_config,
)
from bert_realformer.training.state_dependencies import StateDependencies

if TYPE_CHECKING:  # annotations only
    import keras

    from bert_realformer.finetuning.contract import TaskOptions
    from bert_realformer.training.driver import TrainingTask
    from bert_realformer.training.hooks import TrainingHook
    from modeling import BertConfig
    from tokenization.vocabularies import Tokenizer

EVAL_RESULTS = "eval_results.txt"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a fine-tuning run does, from its options alone (the scripts build it once).

    schedule: the training's `Schedule` (its seed the run's; a restart takes the next).
    eval_every_steps: with training, evaluate the dev set every N steps (0: only at the end),
      keeping the best checkpoint by `keep_best_by` (default: the task's main metric; a loss is
      minimised) and stopping after `early_stopping_patience` evaluations without a better one.
    use_best_checkpoint: evaluation, prediction and export use the run's best checkpoint when it
      kept one (else the weights training ended with).
    on_stuck, max_restarts, restart_deadline: what a run found stuck does (`finetuning.restarts`).
    layerwise_lr_decay, reinit_top_layers, ema_decay, adversary, lora: the fine-tuning options
      beyond the original (`finetuning.layerwise`, `finetuning.averaging`, `finetuning.adversarial`,
      `finetuning.low_rank_adaptation`).
    state_depends_on: the flags the run's training state depends on, recorded with it and refused
      changed when it resumes (`training.state_dependencies`).
    """
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    schedule: Schedule | None = None
    eval_every_steps: int = 0
    keep_best_by: str | None = None
    early_stopping_patience: int = 0
    use_best_checkpoint: bool = True
    export_dir: str | None = None
    on_stuck: str = "warn"                 # warn | restart (from the start, with the next seed)
    max_restarts: int = 3
    restart_deadline: float = 0.0          # Unix seconds: no restart that would end later
    layerwise_lr_decay: float = 1.0
    reinit_top_layers: int = 0
    ema_decay: float = 0.0
    adversary: Adversary | None = None
    lora: Lora | None = None
    state_depends_on: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.lora is not None and (self.layerwise_lr_decay != 1.0 or self.reinit_top_layers):
            raise InputError("lora_rank trains low-rank factors of frozen layers: it takes neither "
                             "layerwise_lr_decay nor reinit_top_layers",
                             options=("lora_rank", "layerwise_lr_decay", "reinit_top_layers"))

    def selection(self, metrics: Sequence[str]) -> Selection:
        """The best evaluation's `Selection` for a task reporting `metrics` (its main one first)."""
        return Selection.by(best_metric(self.keep_best_by, metrics), patience=self.early_stopping_patience or None)

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split, wanted in (("train", self.do_train), ("dev", self.do_eval),
                                                 ("test", self.do_predict)) if wanted)


@dataclasses.dataclass(frozen=True)
class DriverSetup:
    """What a fine-tuning run's driver and tokenizer are made from (`make_driver`): the model's
    files, the variant overrides, the strategy, the batch sizes to check against the model, and the
    driver's options (`for_worker` completes them for this worker)."""
    bert_config_file: str
    vocab_file: str
    max_seq_length: int
    run: RunOptions
    do_lower_case: bool = True
    layer_norm_type: str | None = None
    residual_attention: str | None = None
    strategy: StrategySpec = StrategySpec()
    batches: tuple[tuple[str, int], ...] = ()
    allow_foreign_vocab: bool = False  # a vocab_file other than the one beside init_checkpoint


@dataclasses.dataclass(frozen=True)
class FinetuningOptions:
    """Everything a fine-tuning run is configured with, built once (the scripts build it from their
    flags): what it does (`plan`), what every task is given (`task`), and what its driver is made
    from (`setup`)."""
    plan: Plan
    task: TaskOptions
    setup: DriverSetup

    def make_driver(self, build_model):
        """`make_driver(self.setup, self.plan, build_model)`: the `MakeDriver` of `run`."""
        return make_driver(self.setup, self.plan, build_model)


def make_driver(setup: DriverSetup, plan: Plan, build_model) -> tuple[Driver, Tokenizer]:
    """(driver, tokenizer): the case checked against a released checkpoint's name, the config with
    its variant overrides, the strategy, the batches and vocabulary checked against the model,
    --init_checkpoint checked to exist and fit, and the model `build_model(config)`."""
    from bert_realformer.checkpoints import training_states
    from tokenization import FullTokenizer, validate_case_matches_checkpoint
    from tokenization.vocabularies import has_graph_tokenizer
    init_checkpoint = setup.run.init_checkpoint
    try:
        validate_case_matches_checkpoint(setup.do_lower_case, init_checkpoint)
    except ValueError as error:
        raise InputError(str(error)) from None
    config = load_config(setup.bert_config_file, setup.max_seq_length, setup.layer_norm_type,
                         setup.residual_attention)
    if plan.reinit_top_layers > config.num_hidden_layers:
        raise InputError(f"reinit_top_layers={plan.reinit_top_layers}: {setup.bert_config_file} has "
                         f"{config.num_hidden_layers} layers", options=("reinit_top_layers",))
    if plan.reinit_top_layers and config.num_layer_groups != config.num_hidden_layers:
        raise InputError(f"reinit_top_layers={plan.reinit_top_layers}: the {config.num_hidden_layers} layers of "
                         f"{setup.bert_config_file} share {config.num_layer_groups} set(s) of weights "
                         "(num_hidden_groups), so the top ones cannot be re-initialised alone",
                         options=("reinit_top_layers",))
    strategy = setup.strategy.make()
    check_batches_fit(config, setup.max_seq_length, strategy.num_replicas_in_sync, dict(setup.batches))
    tokenizer = checked_tokenizer(setup.vocab_file, setup.do_lower_case, config.vocab_size)
    if isinstance(tokenizer, FullTokenizer):
        if init_checkpoint and not setup.allow_foreign_vocab:
            check_vocabulary_belongs(setup.vocab_file, init_checkpoint)
    elif plan.export_dir and not has_graph_tokenizer(setup.vocab_file):
        raise InputError(f"export_dir={plan.export_dir}: a SavedModel tokenizes its text in the graph, and "
                         f"vocab_file={setup.vocab_file} is byte-level BPE, which has no TensorFlow op; run "
                         "without export_dir and serve token ids", options=("export_dir", "vocab_file"))
    if init_checkpoint:  # (there, and of this config's shapes: before the data is tokenized)
        training_states.check_fits(training_states.resolve(init_checkpoint), config)
    restart_deadline_for(plan.restart_deadline, strategy)
    build = adapted(build_model, plan.lora)
    driver = Driver(strategy, lambda: build(config), for_worker(setup.run, strategy, training=plan.do_train))
    return driver, tokenizer


MakeDriver = Callable[[Callable[["BertConfig"], "keras.Model"]], tuple["Driver", "Tokenizer"]]


def run(task: FinetuningTask, plan: Plan, make_driver: MakeDriver) -> int:
    """Runs `plan` for `task`: its data is read (and checked) first, then the driver is made
    with the task's model (`make_driver(task.build_model) -> (driver, tokenizer)`). Returns the
    step of the weights evaluation and prediction used."""
    with _nothing_left_if_refused(task.options.output_dir):
        data = task.read(plan.splits)
        driver, tokenizer = make_driver(task.build_model)
    with driver:  # (its claim on the output directory released however the run ends)
        return _run(task, plan, data, driver, tokenizer)


@contextlib.contextmanager
def _nothing_left_if_refused(output_dir: str):
    """Removes what the block adds to `output_dir` (the directory itself, where it adds that) when
    it refuses the run (`InputError`): the label list of a run whose checkpoint or vocabulary was
    then refused would otherwise hold the corrected run to this run's labels."""
    before = set(storage.listdir(output_dir)) if storage.isdir(output_dir) else None
    try:
        yield
    except InputError:
        if before is None:
            storage.rmtree(output_dir)
        elif storage.isdir(output_dir):
            for name in set(storage.listdir(output_dir)) - before:
                path = os.path.join(output_dir, name)
                if storage.isdir(path):
                    storage.rmtree(path)
                else:
                    storage.remove(path)
        raise


def _run(task, plan, data, driver, tokenizer):
    selection = plan.selection(task.metrics)

    def evaluate(step: int) -> Evaluation:
        return task.evaluate(data.dev, task.predict(driver, tokenizer, data.dev, "dev"), step, selection)

    if plan.do_train:
        _record(task, driver)
        step = _train(task, driver, tokenizer, data.train, evaluate if data.dev is not None else None, plan)
    else:
        step = _restore(driver, plan)
    if data.dev is not None:
        evaluation = evaluate(step)
        task.write_predictions(data.dev, evaluation.predictions, "dev")
        write_results(driver, task, evaluation)
    task.settle(driver)
    if plan.do_train:
        _record(task, driver)
    if data.test is not None:
        written = task.write_predictions(data.test, task.predict(driver, tokenizer, data.test, "test"), "test")
        for path in written:
            console.say(f"wrote {path}")
    if plan.export_dir:
        console.say(f"exported {task.export(driver, tokenizer, plan.export_dir)}")
    return step


def _record(task, driver):
    options = task.recorded_options()
    if options:
        recorded_options.update(driver.write_dir, **options)


def _restore(driver, plan, last_step=None):
    """The weights evaluation and prediction use: the run's best checkpoint when it kept one (and
    `use_best_checkpoint`), else those of `last_step` (training's end) or the weights policy's."""
    if plan.use_best_checkpoint:
        found, lines = load_best(driver.model, driver.options.output_dir, last_step)
        if found is not None:
            return driver.use_weights(found, lines)
    return last_step if last_step is not None else driver.restore_for_inference()


def _train(task, driver, tokenizer, examples, evaluate, plan):
    """Trains with the plan's hooks, restarting a stuck run as the plan says; returns the step of
    the weights the model then holds (`_restore`)."""

    def classes_evaluate(step):
        evaluation = evaluate(step)
        return evaluation.result, evaluation.classes

    def attempt(this: Attempt):
        training = task.training_task(examples, tokenizer, dataclasses.replace(plan.schedule, seed=this.seed))
        console.say(training.summary)
        return training, training_hooks(plan, task, training, classes_evaluate if evaluate else None, this)

    step = train_restarting(driver, attempt, plan.on_stuck, plan.max_restarts)
    return _restore(driver, plan, step)


def training_hooks(plan: Plan, task: FinetuningTask, training: TrainingTask, evaluate,
                   attempt: Attempt) -> list[TrainingHook]:
    """The hooks of a fine-tuning attempt: the options beyond the original the plan asks for, then
    the monitoring (`monitoring_hooks`)."""
    hooks: list[TrainingHook] = [StateDependencies(plan.state_depends_on),
                                 LayerwiseTraining(plan.layerwise_lr_decay, plan.reinit_top_layers),
                                 MovingAverages(plan.ema_decay), LowRankAdaptation(plan.lora)]
    if plan.adversary is not None:
        hooks.append(AdversarialTraining(plan.adversary))
    monitoring = Monitoring(
        every_steps=plan.eval_every_steps, selection=plan.selection(task.metrics), shown=task.shown or task.metrics,
        num_classes=task.num_classes, label_names=task.label_names, chance_loss=task.chance_loss,
        on_stuck=plan.on_stuck, restart_deadline=plan.restart_deadline,
        stuck_hint=plan.adversary.stuck_hint() if plan.adversary is not None else task.stuck_hint)
    return hooks + monitoring_hooks(training, evaluate, monitoring, attempt)


@dataclasses.dataclass(frozen=True)
class Monitoring:
    """How a fine-tuning run is watched (`monitoring_hooks`).

    every_steps: evaluate every that many steps and at the end (not before the first step; 0:
      not during training); `shown`: the metrics its line shows; the best by `selection` kept.
    num_classes, label_names, chance_loss: the stuck check's chance loss (ln `num_classes` unless
      `chance_loss` says otherwise; `num_classes` None: no loss sign), and the names of the classes
      the evaluations give.
    on_stuck, restart_deadline: what a stuck run does (`finetuning.restarts`); `stuck_hint`: an
      option of the run that most likely keeps it at chance, which the stuck warning names first.
    """
    every_steps: int = 0
    selection: Selection | None = None
    shown: tuple[str, ...] | None = None
    num_classes: int | None = None
    label_names: Sequence[str] | None = None
    chance_loss: float | None = None
    on_stuck: str = "warn"
    restart_deadline: float = 0.0
    stuck_hint: str | None = None


def monitoring_hooks(training: TrainingTask, evaluate: Callable[[int], tuple] | None, monitoring: Monitoring,
                     attempt: Attempt | None = None) -> list[TrainingHook]:
    """Watching a fine-tuning `attempt` (None: a first attempt, no restarts) as `monitoring` says:
    `evaluate(step) -> (result, classes)` every N steps with the best kept (`PeriodicEval`,
    `KeepBest`), and the stuck check (`StuckCheck`), which reads the classes the evaluations give."""
    hooks: list[TrainingHook] = []
    if monitoring.every_steps:
        if evaluate is None:
            raise ValueError("evaluations during training need an evaluate function")
        if monitoring.selection is not None:
            hooks.append(KeepBest(monitoring.selection))
        hooks.append(PeriodicEval(monitoring.every_steps, evaluate, at_start=False, shown=monitoring.shown))
    watch = StuckWatch(monitoring.num_classes, training.num_warmup_steps, training.num_train_steps,
                       monitoring.chance_loss)
    hooks.append(StuckCheck(watch, attempt or Attempt(), monitoring.label_names, monitoring.on_stuck,
                            monitoring.restart_deadline, monitoring.stuck_hint))
    return hooks


def write_results(driver: Driver, task: FinetuningTask, evaluation: Evaluation) -> None:
    """OUTPUT_DIR/eval_results.txt of the final evaluation, with the run's seed and restarts when
    it restarted; a warning line when every example got one class; the task's shown metrics."""
    result = evaluation.result
    restarts = recorded_options.read(driver.write_dir).get("restarts") or []
    if restarts:
        result = {**result, "seed": driver.options.seed, "restarts": len(restarts)}
    write_eval_results(result, os.path.join(task.options.output_dir, EVAL_RESULTS))
    said = None if evaluation.classes is None else constant_prediction(evaluation.classes, task.label_names)
    if said:
        console.say(f"warning: {said}: the model predicts one class for everything (stuck? another --seed or a "
                   "lower --learning_rate usually helps)")
    for key in task.shown or task.metrics:
        if key in result:
            console.say(f"  {key} = {result[key]}")
