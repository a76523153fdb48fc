"""A study sized to a time budget (`run_study.py --time_budget_minutes`).

The same study takes several times longer on one 2-core CPU than on another (BENCHMARKS.md, "The
demo and the suite: wall time"), and longer still with TensorFlow's own kernels where the scripts
would turn on oneDNN's (`cpu_kernels`). With a budget, before
its first run the study times this CPU on its own pretraining step (a probe of `PROBE_STEPS`
steps in a scratch directory), estimates what the whole study would take, and when that is over
the budget it runs less, saying so: first fewer epochs of every task, down to
`FINETUNING_FLOOR` of them, then fewer pretraining steps (and warm-up), down to
`SMALLEST_FACTOR` of them, and only then fewer epochs again. The pretraining is what the study
compares (its curves, its attention, the checkpoint every task starts from), so it is the last
to be cut; a task's accuracy settles in fewer epochs than it is given.
The estimate: a variant's work per seed is its pretraining steps over the measured rate, times
`WORK_PER_PRETRAINING_STEP` (with the evaluations, the attention analysis and the fine-tuning of
two tasks of about 5,000 examples for 2 epochs: measured on the demo), `PRETRAINING_SHARE` of it
the pretraining's, the rest the tasks'. Most of each side is proportional to its steps; of each,
`UNSCALED_SHARE` of the variant's work is not, and no factor shrinks it: the pretraining's
held-out evaluations before its first step and at its last, and each task run's reading of its
data and its final evaluation. On top come each run's start-up (importing TensorFlow, building
and tracing the model, saving), which no factor shrinks either: the probe's time beyond its
steps. The budget counts from the study's start, or from an earlier time it is given (`make
demo`: before preparing the data), so the probe and whatever came before the first run are
inside it.

A stuck fine-tuning run that restarts (`--on_stuck=restart`) runs again in time no estimate
counted: each task run is given `--restart_deadline`, the budget's end less the expected time of
the runs after it (`restart_deadlines`: the estimate without its margin of a tenth), and restarts
only when, started again, it would end by then. Restarts take the room the margin leaves when the
study runs as fast as expected; a study behind its schedule refuses them, and the run warns instead.

The sizing is written to OUTPUT_DIR/sizing.json before any run: a study run again (to resume,
or with more seeds) keeps it, so its runs' commands stay what they were.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import time

from bert_realformer import storage
from bert_realformer.comparison.execution import write_configs
from bert_realformer.comparison.plan import ATTENTION, PRETRAINING, DownstreamTask, Run, StudyPlan, python_command
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

PROBE_STEPS = 20
# Calibrated on the demo's runs on AMD EPYC Zen 2, Zen 3 and Zen 5 CPUs: a variant's whole work
# over its pretraining steps' time
EXPECTED_WORK_PER_PRETRAINING_STEP = 2.0
# The sizing counts a tenth more, room for what it cannot foresee; a restart's deadline counts the
# expected time of the runs after it, so that room is what stuck runs' restarts may take
WORK_PER_PRETRAINING_STEP = 2.2
# Of that work, a variant's pretraining run (with its evaluations); the rest is its fine-tuning
# runs' (calibrated on the demo)
PRETRAINING_SHARE = 0.6
# Of that work, what each side runs whatever its factor: a held-out evaluation of the
# pretraining, or a task run's reading of its data and its final evaluation (calibrated on the demo
# on the slowest CPU measured, where it weighs most)
UNSCALED_SHARE = 0.03
FINETUNING_FLOOR = 0.5
SMALLEST_FACTOR = 0.1
SIZING_FILE = "sizing.json"
_RATE = re.compile(r"^step \d+/\d+: .*?([0-9.]+) steps/s")


@dataclasses.dataclass(frozen=True)
class Sizing:
    """What the study runs: `factor` of the pretraining steps, `finetuning_factor` of each task's
    epochs."""
    factor: float
    steps_per_second: float        # this CPU's pretraining step rate (the probe's)
    start_seconds: float           # a run's start-up and ending here (the probe's time beyond its steps)
    estimated_minutes: float       # the study as asked, estimated
    budget_minutes: float
    spent_minutes: float = 0.0     # of the budget, gone before the first run (preparing data, the probe)
    budget_ends_at: float = 0.0    # Unix seconds (0: a sizing recorded before restarts were fitted)
    finetuning_factor: float | None = None  # (None: `factor`, as a sizing recorded before the two were apart)

    def __post_init__(self):
        if self.finetuning_factor is None:
            object.__setattr__(self, "finetuning_factor", self.factor)

    @property
    def shrunk(self) -> bool:
        """Whether the study runs less than asked."""
        return self.factor < 1 or self.finetuning_factor < 1

    def scaled_steps(self, steps: int) -> int:
        """`steps` times the factor (at least one, unless `steps` is 0)."""
        return steps if self.factor >= 1 or not steps else max(1, round(steps * self.factor))

    def scaled_task(self, task: DownstreamTask, default_epochs: float = 3.0) -> DownstreamTask:
        """`task` with its `--num_train_epochs` times the fine-tuning factor (the scripts' default
        3 when it does not set it), given last."""
        if self.finetuning_factor >= 1:
            return task
        epochs = float(task.flag("num_train_epochs") or default_epochs)
        scaled = round(epochs * self.finetuning_factor, 3)
        kept = tuple(flag for flag in task.flags if not flag.startswith("--num_train_epochs="))
        return dataclasses.replace(task, flags=(*kept, f"--num_train_epochs={scaled:g}"))

    def line(self, num_train_steps: int) -> str:
        """What the study says about its size."""
        asked = (f"[study] this CPU runs the pretraining step at {self.steps_per_second:.2f} steps/s: the study as "
                 f"asked takes about {self.estimated_minutes:.0f} minutes")
        budget = f"the budget of {self.budget_minutes:g}"
        if self.spent_minutes >= 0.1:
            budget += f" ({self.spent_minutes:.1f} of it spent before the first run)"
        if not self.shrunk:
            return f"{asked}, within {budget}"
        sized = (f"{asked}, over {budget}, so it runs {self.finetuning_factor:.2f} of each task's epochs and "
                 f"pretraining for {self.scaled_steps(num_train_steps)} of {num_train_steps} steps")
        if self.factor < 1:  # the demo's models: at 416 of 600 steps RealFormer had not left it, at 141 none
            sized += "; with fewer steps its models may not leave the unigram stage: report.md says whether they did"
        return sized

    def variant_seconds(self, num_train_steps: int) -> tuple[float, float]:
        """(the pretraining's work, the fine-tuning's) of one variant and seed, as sized, in seconds
        as expected (no margin), start-ups aside; `num_train_steps`: the pretraining steps as asked."""
        work = num_train_steps / self.steps_per_second * EXPECTED_WORK_PER_PRETRAINING_STEP
        return work * sized_share(PRETRAINING_SHARE, self.factor), work * sized_share(1 - PRETRAINING_SHARE,
                                                                                     self.finetuning_factor)


def sized_share(share: float, factor: float) -> float:
    """Of a variant's work as asked, what one side (the pretraining's `share` of it, or the tasks')
    takes when its steps or epochs are `factor` of those asked: its unscaled part whole."""
    return UNSCALED_SHARE + (share - UNSCALED_SHARE) * factor


def restart_deadlines(sizing: Sizing, runs: list[Run], num_train_steps: int, num_tasks: int) -> dict[str, float]:
    """{task run's name: the Unix time it must end by for the runs after it to end within the
    budget}, from each run's expected time (`Sizing.variant_seconds`; `runs`: the sized plan's, in order;
    `num_train_steps`: the pretraining steps as asked); {} for a sizing recorded without the
    budget's end."""
    if not sizing.budget_ends_at:
        return {}
    pretraining, finetuning = sizing.variant_seconds(num_train_steps)
    seconds = {PRETRAINING: pretraining, ATTENTION: 0.0}
    deadlines, after = {}, 0.0
    for run in reversed(runs):
        if run.kind not in seconds:
            deadlines[run.name] = sizing.budget_ends_at - after
        after += sizing.start_seconds + seconds.get(run.kind, finetuning / max(1, num_tasks))
    return deadlines


def estimate_minutes(steps_per_second: float, start_seconds: float, pretraining_steps: int, pretraining_runs: int,
                     processes: int) -> float:
    """The study's minutes: `pretraining_runs` runs of `pretraining_steps` at the rate, their
    attention and fine-tuning runs, and `processes` start-ups."""
    work = pretraining_runs * pretraining_steps / steps_per_second * WORK_PER_PRETRAINING_STEP
    return (work + processes * start_seconds) / 60


def factors_for(budget_minutes: float, steps_per_second: float, start_seconds: float, pretraining_steps: int,
                pretraining_runs: int, processes: int, spent_minutes: float = 0.0) -> tuple[float, float]:
    """(the share of the pretraining steps, the share of the tasks' epochs) that fit what is left
    of the budget after `spent_minutes`: (1, 1) when it all fits; else the epochs cut first, to
    `FINETUNING_FLOOR`, then the steps, to `SMALLEST_FACTOR`, then the epochs again, to it (a
    study smaller than that measures nothing)."""
    whole = estimate_minutes(steps_per_second, 0.0, pretraining_steps, pretraining_runs, processes)
    left = budget_minutes - spent_minutes - processes * start_seconds / 60 - 2 * UNSCALED_SHARE * whole
    pretraining = whole * (PRETRAINING_SHARE - UNSCALED_SHARE)  # the parts of each side that its factor scales
    finetuning = whole * (1 - PRETRAINING_SHARE - UNSCALED_SHARE)
    if pretraining + finetuning <= left:
        return 1.0, 1.0
    if pretraining + FINETUNING_FLOOR * finetuning <= left:
        return 1.0, (left - pretraining) / finetuning
    if SMALLEST_FACTOR * pretraining + FINETUNING_FLOOR * finetuning <= left:
        return (left - FINETUNING_FLOOR * finetuning) / pretraining, FINETUNING_FLOOR
    return SMALLEST_FACTOR, max(SMALLEST_FACTOR, (left - SMALLEST_FACTOR * pretraining) / finetuning)


def rate_from_output(lines: list[str]) -> float:
    """The steps/s of the last progress line of a pretraining run's output."""
    rates = [float(match.group(1)) for match in map(_RATE.match, lines) if match]
    if not rates:
        raise InputError("the probe of the pretraining step printed no progress line")
    return rates[-1]


def probe(plan: StudyPlan) -> tuple[float, float]:
    """(steps/s, seconds of start-up and ending) of this CPU on the study's first pretraining
    run, `PROBE_STEPS` steps of it run in a scratch directory (removed after)."""
    write_configs(plan)
    first = next(run for run in plan.runs() if run.kind == PRETRAINING)
    scratch = os.path.join(plan.output_dir, ".sizing-probe")
    dropped = ("--output_dir=", "--num_train_steps=", "--eval_every_steps=", "--save_checkpoints_steps=", "--do_eval")
    command = [word for word in first.command if not word.startswith(dropped)]
    command += [f"--output_dir={scratch}", f"--num_train_steps={PROBE_STEPS}",
                f"--save_checkpoints_steps={PROBE_STEPS}"]
    started = time.monotonic()
    try:
        run = subprocess.run(python_command(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        storage.rmtree(scratch)
    seconds = time.monotonic() - started
    lines = run.stdout.splitlines()
    if run.returncode:
        raise InputError(f"the probe of the pretraining step failed: {lines[-1] if lines else 'no output'}")
    rate = rate_from_output(lines)
    return rate, max(0.0, seconds - (PROBE_STEPS - 1) / rate)


def size(plan: StudyPlan, budget_minutes: float, budget_started: float) -> Sizing:
    """The sizing recorded in the study's directory, else one measured now (and recorded); the
    budget counts from `budget_started` (a `time.time()`), so what came before the first run
    (preparing the data, the probe itself) is taken from it."""
    found = recorded(plan.output_dir)
    if found is not None:
        return found
    rate, start = probe(plan)
    spent = max(0.0, (time.time() - budget_started) / 60)
    runs = plan.runs()
    shape = (plan.num_train_steps, sum(run.kind == PRETRAINING for run in runs), len(runs))
    factor, finetuning_factor = factors_for(budget_minutes, rate, start, *shape, spent_minutes=spent)
    sizing = Sizing(factor=round(factor, 3), finetuning_factor=round(finetuning_factor, 3),
                    steps_per_second=rate, start_seconds=round(start, 1),
                    estimated_minutes=round(estimate_minutes(rate, start, *shape), 1),
                    budget_minutes=budget_minutes, spent_minutes=round(spent, 2),
                    budget_ends_at=round(budget_started + budget_minutes * 60))
    record(sizing, plan.output_dir)
    return sizing


def recorded(output_dir: str) -> Sizing | None:
    path = os.path.join(output_dir, SIZING_FILE)
    if not storage.exists(path):
        return None
    return Sizing(**json.loads(read_text(path)))


def record(sizing: Sizing, output_dir: str) -> None:
    storage.makedirs(output_dir)
    storage.write_atomic(os.path.join(output_dir, SIZING_FILE),
                         json.dumps(dataclasses.asdict(sizing), indent=1, sort_keys=True) + "\n")
