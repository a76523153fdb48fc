"""The commands the documentation shows, checked against the scripts' flags.

    python -m tools.doc_commands     # (make docs-check) every problem as FILE:LINE: ..., exit 1 if any

A command is a line of a shell code block, or an inline code span, that runs a project script
(`python run_classifier.py ...`, `bert-run-classifier ...`, `python -m bert_realformer.cli...`);
each of its flags must be one the script defines (`--noNAME` for a boolean), and a value that is
not a placeholder (`$CKPT`, `N`, `...`) must parse as the flag's type, lie in its range and be one
of an enum's choices. An inline span that is only flags (`--doc_stride=64`) names no script: each
of its flags must be some script's.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence

from tools.flag_reference import ROOT, Flag, read_flags

DOCUMENTS = ("README.md", "docs/*.md")
# The scripts' module docstrings are their `--help` text: their example commands are documents too.
SCRIPT_MODULES = "bert_realformer/cli/*.py"
OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", ">", ">>", "<", "2>"}
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
BOOLEAN_VALUES = {"true", "false", "t", "f", "1", "0"}
# Flags of other programs that the documents show on their own (pip's, pytest's).
OTHER_PROGRAMS_FLAGS = {"no-deps", "no-binary", "durations", "dist"}
# absl's own, which every script takes (defined as it runs, not as it is imported).
ABSL_FLAGS = {name: Flag(name, "bool" if name.startswith("help") else "string", None, "", builtin=True)
              for name in ("help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok", "verbosity")}


@dataclasses.dataclass(frozen=True)
class Command:
    """`script` (a bert_realformer/cli module's name, or None for a span of flags alone) with
    its arguments as the shell would pass them; `where`: FILE:LINE; `complete`: a command to
    run (a code block's), where every flag but a boolean has its value, not one named in prose."""
    script: str | None
    args: tuple[str, ...]
    where: str
    complete: bool = False


def _script_of(token: str, scripts: Sequence[str]) -> str | None:
    name = token.rsplit("/", 1)[-1]
    if name.endswith(".py") and name[:-3] in scripts and "bench/" not in token:
        return name[:-3]
    if name.startswith("bert-") and name[5:].replace("-", "_") in scripts:
        return name[5:].replace("-", "_")
    if name.startswith("bert_realformer.cli.") and name.split(".")[-1] in scripts:
        return name.split(".")[-1]
    return None


def _commands_in_tokens(tokens: Sequence[str], where: str, scripts: Sequence[str],
                        complete: bool) -> Iterator[Command]:
    """The script commands in one shell line's tokens (operators end a command)."""
    script, args = None, []
    for token in [*tokens, ";"]:
        if token in OPERATORS:
            if script:
                yield Command(script, tuple(args), where, complete)
            script, args = None, []
        elif script is None:
            script = _script_of(token, scripts)
        else:
            args.append(token)


def _split(line: str, operators: bool) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=operators)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def commands_in(text: str, source: str, scripts: Sequence[str]) -> tuple[list[Command], list[str]]:
    """(the commands of a Markdown text, the lines that could not be read as a shell would)."""
    commands, unreadable = [], []
    lines = text.splitlines()
    fence, language, pending, pending_start = None, "", "", 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if fence is None:
                fence, language = stripped[:3], stripped[3:].strip().lower()
            else:
                if pending:
                    unreadable.append(f"{source}:{pending_start}: a command the block does not end")
                fence, pending = None, ""
            continue
        if fence is not None:
            if language not in SHELL_LANGUAGES:
                continue
            if not pending:
                pending_start = number
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            try:
                tokens = _split(pending, operators=True)
            except ValueError as error:
                if "closing quotation" in str(error) and number < len(lines):  # a quoted string over lines
                    pending += "\n"
                    continue
                unreadable.append(f"{source}:{pending_start}: {error}")
                tokens = []
            commands += _commands_in_tokens(tokens, f"{source}:{pending_start}", scripts, complete=True)
            pending = ""
            continue
        for span in re.findall(r"`([^`]+)`", line):
            commands += _span_commands(span, f"{source}:{number}", scripts)
    return commands, unreadable


def _span_commands(span: str, where: str, scripts: Sequence[str]) -> list[Command]:
    try:
        tokens = [token.rstrip(":,.;") for token in _split(span, operators=False)]
    except ValueError:
        return []
    found = list(_commands_in_tokens(tokens, where, scripts, complete=False))
    if found:
        return found
    if tokens and tokens[0].startswith("--") and all(token.startswith("--") or token in ("...", "[...]")
                                                     for token in tokens):
        return [Command(None, tuple(tokens), where)]
    return []


def _is_placeholder(value: str) -> bool:
    return (bool(re.fullmatch(r"[A-Z][A-Z0-9_]*|[a-z]", value)) or "..." in value or "…" in value
            or any(mark in value for mark in "$<>{}[]*"))


def _value_problem(flag: Flag, value: str | None, complete: bool) -> str | None:
    """What is wrong with `--NAME=value` for `flag`, or None."""
    from bert_realformer.commandline.flag_ranges import RANGES
    if value is None:
        return f"--{flag.name} needs a value" if complete and flag.kind != "bool" and not flag.builtin else None
    if flag.kind == "bool":
        return None if value.lower() in BOOLEAN_VALUES else f"--{flag.name}={value}: expected true or false"
    for alternative in value.split("|"):
        if _is_placeholder(alternative) or not alternative:
            continue
        if flag.choices and alternative not in flag.choices:
            return f"--{flag.name}={alternative}: expected one of {', '.join(flag.choices)}"
        if flag.kind in ("int", "float"):
            try:
                number = int(alternative) if flag.kind == "int" else float(alternative)
            except ValueError:
                return f"--{flag.name}={alternative}: expected {'an integer' if flag.kind == 'int' else 'a number'}"
            limits = RANGES.get(flag.name)
            if limits is not None and not limits.accepts(number):
                return f"--{flag.name}={alternative}: {limits.describe()}"
    return None


def _argument_problem(argument: str, flags: Mapping[str, Flag], complete: bool) -> str | None:
    argument = argument.strip("[]")
    if not argument.startswith("--") or argument == "--":
        return None
    name, _, value = argument[2:].partition("=")
    given = value if "=" in argument else None
    if name in flags:
        return _value_problem(flags[name], given, complete)
    if name.startswith("no") and flags.get(name[2:]) and flags[name[2:]].kind == "bool" and given is None:
        return None
    return f"no flag --{name}"


def _apart_from_the_checkpoint(command: Command) -> list[str]:
    """A config or vocabulary named bare (`bert_config.json`) beside an `--init_checkpoint` in a
    directory: run from the repository root that is the repository's own config, not the
    checkpoint's (a shape mismatch, or a model silently of another variant)."""
    given = dict(argument.strip("[]")[2:].partition("=")[::2] for argument in command.args if argument.startswith("--"))
    checkpoint = given.get("init_checkpoint", "")
    if "/" not in checkpoint:
        return []
    return [f"{command.where}: {command.script}.py: --{name}={given[name]} is not beside "
            f"--init_checkpoint={checkpoint}: name the checkpoint's own file"
            for name in ("bert_config_file", "vocab_file") if given.get(name) and "/" not in given[name]]


def problems(commands: Sequence[Command], flags_by_script: Mapping[str, Sequence[Flag]]) -> list[str]:
    """Every flag of `commands` that its script does not define or whose value it would refuse."""
    by_script = {script: {**ABSL_FLAGS, **{flag.name: flag for flag in defined}}
                 for script, defined in flags_by_script.items()}
    anywhere: dict[str, Flag] = dict(ABSL_FLAGS)
    for defined in flags_by_script.values():
        for flag in defined:
            anywhere.setdefault(flag.name, flag)
    found = []
    for command in commands:
        if command.complete and command.script:
            given = {argument.strip("[]")[2:].partition("=")[0] for argument in command.args}
            missing = [name for name, flag in by_script[command.script].items() if flag.required and name not in given]
            if missing and not given & {"help", "helpfull", "helpshort"}:
                found.append(f"{command.where}: {command.script}.py: " + ", ".join(f"--{name}" for name in missing)
                             + (" is" if len(missing) == 1 else " are") + " required")
        if command.script:
            found += _apart_from_the_checkpoint(command)
        for argument in command.args:
            if command.script is None:
                if argument.strip("[]")[2:].partition("=")[0] in OTHER_PROGRAMS_FLAGS:
                    continue
                problem = _argument_problem(argument, anywhere, command.complete)
                if problem == f"no flag {argument.strip('[]').partition('=')[0]}":
                    problem = f"no script has the flag {argument.strip('[]').partition('=')[0]}"
                who = "`" + argument + "`"
            else:
                problem = _argument_problem(argument, by_script[command.script], command.complete)
                who = f"{command.script}.py"
            if problem:
                found.append(f"{command.where}: {who}: {problem}")
    return found


def documents() -> list[pathlib.Path]:
    return [path for pattern in DOCUMENTS for path in sorted(ROOT.glob(pattern))]


def docstring_commands(path: pathlib.Path, scripts: Sequence[str]) -> tuple[list[Command], list[str]]:
    """The example commands of a script module's docstring (its `--help`), as a shell block:
    lines that start with `python` or `bert-`, with their continuation lines."""
    import ast
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree, clean=False)
    if not docstring:
        return [], []
    first_line = tree.body[0].lineno
    block, numbers, continuing = [], [], False
    for offset, line in enumerate(docstring.splitlines()):
        if continuing or line.strip().startswith(("python ", "bert-")):
            block.append(line)
            numbers.append(first_line + offset)
            continuing = line.rstrip().endswith("\\")
    commands, unreadable = commands_in("```bash\n" + "\n".join(block) + "\n```\n", "", scripts)
    where = str(path.relative_to(ROOT))
    # (commands_in numbers lines of the block it was given: map them back to the file's lines)
    located = [dataclasses.replace(command, where=f"{where}:{numbers[int(command.where.split(':')[1]) - 2]}")
               for command in commands]
    return located, [f"{where}: {line.split(': ', 1)[-1]}" for line in unreadable]


def check_documents(paths: Sequence[pathlib.Path] | None = None,
                    flags_by_script: Mapping[str, Sequence[Flag]] | None = None) -> tuple[list[Command], list[str]]:
    """(every command of the documents, every problem found in them)."""
    flags_by_script = flags_by_script or read_flags()
    commands, found = [], []
    for path in paths or documents():
        these, unreadable = commands_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)),
                                        list(flags_by_script))
        commands += these
        found += unreadable
    if paths is None:
        for path in sorted(ROOT.glob(SCRIPT_MODULES)):
            these, unreadable = docstring_commands(path, list(flags_by_script))
            commands += these
            found += unreadable
    return commands, found + problems(commands, flags_by_script)


def main(argv: Sequence[str]) -> int:
    del argv
    commands, found = check_documents()
    for problem in found:
        print(problem, file=sys.stderr)
    print(f"{len(commands)} commands checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
