"""What a study runs: variants x seeds, each pretrained (or continued from one checkpoint),
analysed and fine-tuned on every downstream task, one directory per run.

    plan = StudyPlan(output_dir="study", variants=("post-LN", "RealFormer"), seeds=(1, 2),
                     base_config={...}, pretraining_flags=[...], tasks=[DownstreamTask.parse(
                         "sentiment=run_classifier.py --task_name=thucnews --data_dir=data/sentiment")],
                     vocab_file="vocab.txt", attention_examples=256)
    for run in plan.runs():                 # in order: seed by seed, variant by variant
        run.name, run.directory, run.command, run.done_marker

With `released_baseline` (and an `init_checkpoint`), the pseudo-variant `released` fine-tunes
from that checkpoint itself, without continued pretraining (the baseline a user has for free),
and its attention is analysed once (it does not depend on the seed).

Runs of one seed share it for everything seeded: the initial weights (where the variants'
shapes agree: every weight but pre-LN's final LayerNorm, which starts at ones and zeros), the
order of the pretraining data, dropout, and the fine-tuning runs. So seeds pair across variants.
"""

import dataclasses
import importlib.util
import os
import re
import shlex
import sys
from collections.abc import Sequence

from bert_realformer.errors import InputError

BASELINE_VARIANT = "post-LN"
RELEASED = "released"  # the init_checkpoint itself, fine-tuned without continued pretraining
PRETRAINING = "pretraining"
ATTENTION = "attention"


# A RealFormer variant continued from a checkpoint with the warm start: the same model, its
# pretraining run given --residual_attention_warmup_steps: the study's (`RealFormer+warmup`) or
# the steps the name gives (`RealFormer+warmup1000`, a longer warm-up beside the study's).
WARMUP_SUFFIX = "+warmup"
_WARMUP = re.compile(r"\+warmup([1-9]\d*)?$")


def slug(name: str) -> str:
    """A directory name for a variant: `RealFormer-mean+warmup` -> `realformer_mean_warmup`."""
    return name.lower().replace("-", "_").replace("+", "_")


def model_variant(name: str) -> str:
    """The model a study variant trains: `RealFormer+warmup` (or `+warmup1000`) -> `RealFormer`."""
    return _WARMUP.sub("", name)


def warmed_up(name: str) -> bool:
    return _WARMUP.search(name) is not None


def warmup_steps(name: str, study_steps: int) -> int:
    """The warm-up steps of a `+warmup` variant: those its name gives, else `study_steps`."""
    given = _WARMUP.search(name).group(1)
    return int(given) if given else study_steps


def variant_keys(name: str) -> dict[str, str]:
    """The config keys that make the variant named `name` (`modeling.variants.NAMED`; imported
    here, not at the top: the study's scripts run without TensorFlow)."""
    from modeling.variants import NAMED
    return NAMED[model_variant(name)].config_keys()


def check_variants(names, warmup_steps: int = 0):
    """`names` are `modeling.variants.NAMED`'s, a RealFormer one possibly with `+warmup` (which
    needs `warmup_steps`) or `+warmupN` (N steps), none twice."""
    from modeling.variants import NAMED
    realformers = [name for name, variant in NAMED.items() if variant.is_realformer]
    known = [*NAMED, *(name + WARMUP_SUFFIX for name in realformers)]
    unknown = [n for n in names if n not in NAMED and not (warmed_up(n) and model_variant(n) in realformers)]
    if unknown:
        raise InputError(f"variants: unknown variant {unknown[0]!r}; expected some of {', '.join(known)} (a "
                         "+warmup variant may name its steps: RealFormer+warmup1000)", options=("variants",))
    if len(set(names)) != len(names):
        raise InputError("variants: a variant is named twice", options=("variants",))
    if any(n.endswith(WARMUP_SUFFIX) for n in names) and not warmup_steps:
        raise InputError("variants: a +warmup variant needs --residual_attention_warmup_steps",
                         options=("variants", "residual_attention_warmup_steps"))


@dataclasses.dataclass(frozen=True)
class DownstreamTask:
    """A fine-tuning task: a name, one of the project's scripts and its flags (data, epochs,
    ...). The study adds the config, vocabulary, checkpoint, output directory and seed."""
    name: str
    script: str
    flags: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str) -> "DownstreamTask":
        """`NAME=SCRIPT --flag=value ...` (as --task gives it)."""
        name, _, command = spec.partition("=")
        words = shlex.split(command)
        if not name or not name.replace("_", "").replace("-", "").isalnum() or not words:
            raise InputError(f"task={spec!r}: expected NAME=SCRIPT --flag=value ..., e.g. "
                             "sentiment=run_classifier.py --task_name=thucnews --data_dir=data", options=("task",))
        if name in (PRETRAINING, ATTENTION):
            raise InputError(f"task={spec!r}: the name {name!r} is the study's own; choose another", options=("task",))
        script = words[0]
        if not script.endswith(".py") or os.sep in script or importlib.util.find_spec(_module(script)) is None:
            raise InputError(f"task={spec!r}: {script} is not one of the project's scripts", options=("task",))
        return cls(name, script, tuple(words[1:]))

    def flag(self, name: str) -> str | None:
        """The value this task's flags give `--name` (None when absent)."""
        value = None
        for word in self.flags:
            if word.startswith(f"--{name}="):
                value = word.split("=", 1)[1]
        return value


@dataclasses.dataclass(frozen=True)
class Run:
    """One process of the study."""
    name: str                  # what the study prints: "pretrain RealFormer seed 2"
    variant: str
    seed: int
    kind: str                  # PRETRAINING, ATTENTION or a task's name
    directory: str
    command: tuple[str, ...]   # the script's path and its flags
    done_marker: str           # exists once the run has finished


@dataclasses.dataclass
class StudyPlan:
    output_dir: str
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    base_config: dict
    pretraining_flags: list[str]   # run_pretraining.py's data, size, schedule and eval flags
    num_train_steps: int
    tasks: list[DownstreamTask]
    vocab_file: str
    attention_input: str           # held-out TFRecords for analyze_attention.py
    attention_examples: int = 256
    init_checkpoint: str | None = None
    # {task run's name: its --restart_deadline} (`sizing.restart_deadlines`), for the tasks that restart
    restart_deadlines: dict[str, float] = dataclasses.field(default_factory=dict)

    released_baseline: bool = False
    residual_attention_warmup_steps: int = 0  # the +warmup variants' pretraining runs'

    def __post_init__(self):
        if self.released_baseline and not self.init_checkpoint:
            raise InputError("released_baseline fine-tunes the init_checkpoint as released: give init_checkpoint",
                             options=("released_baseline", "init_checkpoint"))

    @property
    def compared(self) -> tuple[str, ...]:
        """What the tables compare: `released` (with `released_baseline`) and the variants."""
        return ((RELEASED,) if self.released_baseline else ()) + self.variants

    def config_path(self, variant: str) -> str:
        return os.path.join(self.output_dir, "configs", f"{slug(variant)}.json")

    def config(self, variant: str) -> dict:
        """The base config with the variant's keys (`released`: the base config as it is)."""
        return dict(self.base_config) if variant == RELEASED else {**self.base_config, **variant_keys(variant)}

    def run_dir(self, variant: str, seed: int, kind: str) -> str:
        return os.path.join(self.output_dir, "runs", slug(variant), f"seed-{seed}", kind)

    def checkpoint(self, variant: str, seed: int) -> str:
        """The pretrained model a variant's downstream runs start from."""
        if variant == RELEASED:
            return self.init_checkpoint
        return os.path.join(self.run_dir(variant, seed, PRETRAINING), f"model.ckpt-{self.num_train_steps}")

    def runs(self) -> list[Run]:
        runs = []
        for seed in self.seeds:
            if self.released_baseline:
                if seed == self.seeds[0]:
                    runs.append(self._attention(RELEASED, seed))
                runs.extend(self._downstream(RELEASED, seed, task) for task in self.tasks)
            for variant in self.variants:
                runs.append(self._pretraining(variant, seed))
                runs.append(self._attention(variant, seed))
                runs.extend(self._downstream(variant, seed, task) for task in self.tasks)
        return runs

    def _pretraining(self, variant, seed):
        directory = self.run_dir(variant, seed, PRETRAINING)
        flags = [f"--bert_config_file={self.config_path(variant)}", f"--output_dir={directory}", "--do_train",
                 "--do_eval", f"--seed={seed}", *self.pretraining_flags]
        if self.init_checkpoint:
            flags.append(f"--init_checkpoint={self.init_checkpoint}")
        if warmed_up(variant):
            steps = warmup_steps(variant, self.residual_attention_warmup_steps)
            flags.append(f"--residual_attention_warmup_steps={steps}")
        return Run(f"pretrain {variant} seed {seed}", variant, seed, PRETRAINING, directory,
                   ("run_pretraining.py", *flags), os.path.join(directory, "eval_results.txt"))

    def _attention(self, variant, seed):
        directory = self.run_dir(variant, seed, ATTENTION)
        pretraining = dict(f.split("=", 1) for f in self.pretraining_flags if "=" in f)
        flags = [f"--bert_config_file={self.config_path(variant)}",
                 f"--init_checkpoint={self.checkpoint(variant, seed)}", f"--input_file={self.attention_input}",
                 f"--max_seq_length={pretraining.get('--max_seq_length', 128)}",
                 f"--max_predictions_per_seq={pretraining.get('--max_predictions_per_seq', 20)}",
                 f"--max_examples={self.attention_examples}", f"--output_dir={directory}",
                 f"--title={variant} seed {seed}"]
        return Run(f"attention {variant} seed {seed}", variant, seed, ATTENTION, directory,
                   ("analyze_attention.py", *flags), os.path.join(directory, "attention_stats.json"))

    def _downstream(self, variant, seed, task):
        directory = self.run_dir(variant, seed, task.name)
        flags = [*task.flags, f"--bert_config_file={self.config_path(variant)}", f"--vocab_file={self.vocab_file}",
                 f"--init_checkpoint={self.checkpoint(variant, seed)}", f"--output_dir={directory}",
                 f"--seed={seed}"]
        flags += [f"--{name}" for name in ("do_train", "do_eval") if task.flag(name) is None
                  and f"--{name}" not in task.flags and f"--no{name}" not in task.flags]
        name = f"{task.name} {variant} seed {seed}"
        if name in self.restart_deadlines and task.flag("on_stuck") == "restart" and not task.flag("restart_deadline"):
            flags.append(f"--restart_deadline={self.restart_deadlines[name]:.0f}")
        return Run(name, variant, seed, task.name, directory,
                   (task.script, *flags), os.path.join(directory, "eval_results.txt"))


def _module(script: str) -> str:
    """The module of one of the project's scripts: `run_classifier.py` ->
    `bert_realformer.cli.run_classifier` (named, not imported: the scripts are the layer above)."""
    return "bert_realformer.cli." + script.removesuffix(".py")


def shown(command: Sequence[str]) -> str:
    """A command as a user would type it in the repository, paths under the current directory
    made relative."""
    here = os.getcwd() + os.sep
    words = ["python", *(w.replace(here, "") for w in command)]
    return " ".join(shlex.quote(w) if " " in w else w for w in words)


def python_command(command: Sequence[str]) -> list[str]:
    """The process for `command` (`[SCRIPT, flags...]`): one of the project's scripts (a bare
    name) runs as its module, installed or not; any other script by its path."""
    script, *flags = command
    if os.sep in script:
        return [sys.executable, *command]
    return [sys.executable, "-m", _module(script), *flags]
