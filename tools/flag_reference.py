"""The scripts' flag reference, `docs/flags/*.md`, generated from their absl flags.

    python -m tools.flag_reference           # (make docs) writes docs/flags/
    python -m tools.flag_reference --check   # exit 1, naming each page that differs from the flags

Each script's flags are read in a process of its own (every `bert_realformer.cli` module defines
its flags in absl's one global registry as it is imported, so two scripts cannot share a process).
The flags that the training scripts share, with the same default and help in each, are written
once (`training.md`, `finetuning.md`); every other flag is on its script's page.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "bert_realformer" / "cli"
OUTPUT = ROOT / "docs" / "flags"
# Pages for flags that several scripts share word for word: the scripts of each (a flag goes to
# the first page whose scripts are exactly the scripts that have it, with one default and help).
SHARED_PAGES = {
    "training": ("run_pretraining", "run_classifier", "run_ner", "run_squad", "run_multiple_choice"),
    "finetuning": ("run_classifier", "run_ner", "run_squad", "run_multiple_choice"),
}
# absl's names of its flag types, as the reference writes them.
KINDS = {"comma separated list of strings": "list", "multi string": "repeatable string"}
# Defaults that depend on the machine the flags are read on, shown as what they are.
MACHINE_DEFAULTS = {"num_workers": "the CPUs this process may run on"}
SHARED_TITLES = {"training": "The training flags", "finetuning": "The fine-tuning flags"}
SHARED_INTROS = {
    "training": "Distribution, precision, compilation, the optimizer, the Transformer variant and checkpoints: "
                "the same in every training script.",
    "finetuning": "Evaluation during training, the best checkpoint, early stopping, stuck runs, prediction and "
                  "the fine-tuning options beyond the original: the same in every fine-tuning script.",
}


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag as a script defines it. `default`: as typed on a command line (None: none);
    `choices`: an enum's values; `range`: the numeric range `flag_ranges` checks, in words."""
    name: str
    kind: str
    default: str | None
    help: str
    choices: tuple[str, ...] = ()
    range: str | None = None
    required: bool = False
    builtin: bool = False  # absl's own (--help, --flagfile, --verbosity ...): accepted, not documented

    def signature(self) -> tuple:
        return (self.kind, self.default, self.help, self.choices, self.range)


def scripts() -> list[str]:
    """Every script: one module each in bert_realformer/cli."""
    return sorted(path.stem for path in CLI.glob("*.py") if path.stem != "__init__")


def _as_typed(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def _is_required(flag) -> bool:
    """Marked required (`runner.require_flags`: absl's validator that refuses None)."""
    return any("must have a value other than None" in str(getattr(validator, "message", ""))
               for validator in flag.validators)


def _dump(script: str) -> list[dict]:
    """The flags `script` defines (run in the script's own process: `--dump`)."""
    import importlib

    from absl import flags

    from bert_realformer.commandline.flag_ranges import RANGES
    importlib.import_module(f"bert_realformer.cli.{script}")
    found = []
    for module, defined in flags.FLAGS.flags_by_module_dict().items():
        builtin = module.startswith("absl.")
        for flag in defined:
            limits = None if builtin else RANGES.get(flag.name)
            choices = tuple(getattr(flag.parser, "enum_values", None) or ())
            text = " ".join(flag.help.split())
            if choices and text.startswith(f"<{'|'.join(choices)}>: "):  # (absl's own prefix: choices are listed)
                text = text[len("|".join(choices)) + 4:]
            text = text.removesuffix(";").removesuffix("; repeat this option to specify a list of values")
            found.append(dataclasses.asdict(Flag(
                name=flag.name, kind="enum" if choices else KINDS.get(flag.flag_type(), flag.flag_type()),
                default=_as_typed(flag.default),
                help=text, choices=choices, range=limits.describe() if limits else None,
                required=_is_required(flag), builtin=builtin)))
    return found


def read_flags(names: Iterable[str] | None = None) -> dict[str, list[Flag]]:
    """{script: its flags in definition order}, each script read in a process of its own."""
    names = list(names or scripts())
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def one(script):
        done = subprocess.run([sys.executable, "-m", "tools.flag_reference", "--dump", script], cwd=ROOT,
                              env=environment, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"reading the flags of {script} failed:\n{done.stderr}")
        return [Flag(**{**row, "choices": tuple(row["choices"])}) for row in json.loads(done.stdout)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(names, pool.map(one, names)))


def _page_of(sharing: Sequence[str], script: str) -> str:
    """The page for a flag that the scripts `sharing` define alike: the shared page with exactly
    those scripts, else `script`'s own."""
    for page, members in SHARED_PAGES.items():
        if sorted(sharing) == sorted(members):
            return page
    return script


def assign_pages(all_flags: Mapping[str, Sequence[Flag]]) -> dict[str, list[tuple[str, Flag]]]:
    """{page: [(script, flag)]}: every documented flag of every script on exactly one page per
    script (shared pages hold a flag once, under the first of its scripts)."""
    by_name: dict[str, dict[tuple, list[str]]] = {}
    for script, defined in all_flags.items():
        for flag in defined:
            if not flag.builtin:
                by_name.setdefault(flag.name, {}).setdefault(flag.signature(), []).append(script)
    pages: dict[str, list[tuple[str, Flag]]] = {}
    placed: set[tuple[str, str]] = set()
    for script, defined in all_flags.items():
        for flag in defined:
            if flag.builtin:
                continue
            page = _page_of(by_name[flag.name][flag.signature()], script)
            if (page, flag.name) in placed:
                continue
            placed.add((page, flag.name))
            pages.setdefault(page, []).append((script, flag))
    return pages


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _flag_row(flag: Flag) -> str:
    if flag.required:
        default = "**required**"
    elif flag.name in MACHINE_DEFAULTS:
        default = MACHINE_DEFAULTS[flag.name]
    elif flag.kind == "bool":
        default = f"`{flag.default}`"
    else:
        default = f"`{flag.default}`" if flag.default not in (None, "") else "none"
    details = []
    if flag.choices:
        details.append("one of " + ", ".join(f"`{choice}`" for choice in flag.choices))
    if flag.range:
        details.append(flag.range)
    if flag.kind == "bool":
        details.append(f"`--no{flag.name}` turns it off")
    more = f" ({'; '.join(details)})" if details else ""
    return f"| `--{flag.name}` | {flag.kind} | {_cell(default)} | {_cell(flag.help)}{_cell(more)} |"


def _table(rows: Iterable[Flag]) -> list[str]:
    return ["| flag | type | default | meaning |", "| --- | --- | --- | --- |", *(_flag_row(flag) for flag in rows)]


def _description(script: str) -> str:
    """The first sentence-paragraph of the script module's docstring."""
    import ast
    tree = ast.parse((CLI / f"{script}.py").read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree) or ""
    return " ".join(docstring.split("\n\n")[0].split())


HEADER = "<!-- Generated by `make docs` (python -m tools.flag_reference) from the scripts' flags: edit the flags. -->"


def render(all_flags: Mapping[str, Sequence[Flag]]) -> dict[str, str]:
    """{file name: Markdown} of the whole reference."""
    pages = assign_pages(all_flags)
    files = {}
    for script in all_flags:
        shared = [page for page in SHARED_PAGES if script in SHARED_PAGES[page] and page in pages]
        lines = [HEADER, "", f"# `{script}.py` flags", "", _description(script), "",
                 f"`python {script}.py --flag=value ...`, or the installed command `bert-{script.replace('_', '-')}`; "
                 "`--help` prints the same list."]
        if shared:
            lines += ["", "It also takes " + " and ".join(f"[{SHARED_TITLES[page].lower()}]({page}.md)"
                                                       for page in shared) + "."]
        own = [flag for _, flag in pages.get(script, [])]
        lines += ["", *_table(own)] if own else ["", "It has no flags of its own."]
        files[f"{script}.md"] = "\n".join(lines) + "\n"
    for page in SHARED_PAGES:
        if page not in pages:
            continue
        users = ", ".join(f"[`{script}.py`]({script}.md)" for script in SHARED_PAGES[page])
        lines = [HEADER, "", f"# {SHARED_TITLES[page]}", "", SHARED_INTROS[page], "", f"Taken by {users}.", "",
                 *_table(flag for _, flag in pages[page])]
        files[f"{page}.md"] = "\n".join(lines) + "\n"
    index = [HEADER, "", "# Flag reference", "", "Every flag of every script, with its type, default and meaning.", "",
             "| script | what it does |", "| --- | --- |"]
    index += [f"| [`{script}.py`]({script}.md) | {_cell(_description(script))} |" for script in all_flags]
    index += ["", "Shared by several scripts: " + ", ".join(f"[{SHARED_TITLES[page].lower()}]({page}.md)"
                                                         for page in SHARED_PAGES if page in pages) + "."]
    files["README.md"] = "\n".join(index) + "\n"
    return files


def differences(files: Mapping[str, str], directory: pathlib.Path = OUTPUT) -> list[str]:
    """The pages under `directory` that differ from `files` (or are missing, or are not in it)."""
    found = [name for name, text in files.items()
             if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text]
    found += [path.name for path in sorted(directory.glob("*.md")) if path.name not in files]
    return found


def write(files: Mapping[str, str], directory: pathlib.Path = OUTPUT) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob("*.md"):
        if path.name not in files:
            path.unlink()
    for name, text in files.items():
        temporary = directory / f".{name}.tmp"
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(directory / name)


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--dump"]:
        json.dump(_dump(argv[1]), sys.stdout)
        return 0
    files = render(read_flags())
    if argv[:1] == ["--check"]:
        stale = differences(files)
        for name in stale:
            print(f"docs/flags/{name} differs from the scripts' flags: run make docs", file=sys.stderr)
        return 1 if stale else 0
    write(files)
    print(f"wrote {len(files)} pages to {OUTPUT.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
