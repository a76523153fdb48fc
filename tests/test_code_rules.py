"""Rules of the code's shape that a review would otherwise re-check by hand: the Transformer
variant is read in one module (`modeling.variants`), never by comparing config strings; no two
modules share a base name but the parts every task has; no module-level state but the registries;
the library's errors name options, never the scripts' flags (the command line maps them)."""

import ast
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ("bert_realformer", "modeling", "tokenization")
VARIANT_KEYS = {"layer_norm_type", "residual_attention"}
VARIANT_MODULE = ROOT / "modeling" / "variants.py"


def _library_files():
    for package in LIBRARY:
        yield from sorted((ROOT / package).rglob("*.py"))


def _compared_names(node):
    for operand in (node.left, *node.comparators):
        if isinstance(operand, ast.Attribute):
            yield operand.attr
        elif isinstance(operand, ast.Name):
            yield operand.id
        elif isinstance(operand, ast.Subscript) and isinstance(operand.slice, ast.Constant):
            yield operand.slice.value


def test_no_variant_string_comparisons_outside_the_variant_module():
    found = []
    for path in _library_files():
        if path == VARIANT_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and VARIANT_KEYS & set(_compared_names(node)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_the_rule_sees_a_comparison():
    tree = ast.parse('if config.residual_attention != "none":\n    pass\nif options["layer_norm_type"] == "pre": pass')
    compares = [node for node in ast.walk(tree) if isinstance(node, ast.Compare)]
    assert [VARIANT_KEYS & set(_compared_names(node)) for node in compares] == [{"residual_attention"},
                                                                                 {"layer_norm_type"}]


# Base names several library modules may share: the same part of different tasks (each task's
# `task`, `reading`, `features`, `metrics`, `losses`).
SHARED_BASE_NAMES = {"task.py", "reading.py", "features.py", "metrics.py", "losses.py", "__init__.py"}


def test_no_two_modules_share_a_base_name_but_the_parts_of_tasks():
    """A module's base name says what it holds: two modules of one name in different packages
    (two `report.py`, two `progress.py`) are read for each other."""
    by_name = {}
    for path in _library_files():
        by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1 and name not in SHARED_BASE_NAMES}
    assert not shared, shared


# Module-level state that is written after import, each with why it must be module-level.
MUTABLE_STATE_ALLOWED = {
    # the registries of fine-tuning tasks and of weight formats: written only by `register` as a
    # task or format module is imported
    ("bert_realformer/tasks/registry.py", "TASKS"),
    ("bert_realformer/checkpoints/formats.py", "FORMATS"),
    # a pool worker's tokenizer, set by the pool's initializer in each worker process (the
    # multiprocessing idiom: a worker has no other place to keep what its tasks share)
    ("bert_realformer/pretraining/documents.py", "_worker_tokenizer"),
    # which flags each shared group holds, written only as the scripts define their flags
    ("bert_realformer/commandline/help_text.py", "_GROUPS"),
    # the flags a user left out set to the checkpoint's own files, once, before anything reads them
    ("bert_realformer/commandline/model_files.py", "FLAGS.bert_config_file"),
    ("bert_realformer/commandline/model_files.py", "FLAGS.vocab_file"),
}
_MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "bytearray"}


def _module_state(path, tree):
    """(module-level names bound to a mutable value, names a function declares `global`, class
    attributes assigned from outside their class: `Class.attribute = ...`)."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) and node.value is not None else []
        value = getattr(node, "value", None)
        call = isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None))
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) \
                or call in _MUTABLE_CALLS:
            yield from (ast.unparse(target) for target in targets if ast.unparse(target) != "__all__")
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            yield from node.names
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id[:1].isupper()):
                    yield ast.unparse(target)


def test_no_module_level_mutable_state_but_the_allowed():
    found = set()
    for path in _library_files():
        relative = str(path.relative_to(ROOT))
        found |= {(relative, name) for name in _module_state(path, ast.parse(path.read_text(encoding="utf-8")))}
    assert found == MUTABLE_STATE_ALLOWED, sorted(found ^ MUTABLE_STATE_ALLOWED)


def test_the_state_rule_sees_each_kind():
    code = ("A = {}\nB = [1]\nC = set()\nD = (1, 2)\nE = types.MappingProxyType({})\n__all__ = ['x']\n"
            "def f():\n    global G\n    Terminated.received = True\n    self.x = 1\n")
    assert sorted(_module_state(None, ast.parse(code))) == ["A", "B", "C", "G", "Terminated.received"]


# Where a library error's words are a command line: the study's `--task` value holds a script's
# flags, and the original `validate_case_matches_checkpoint` tells which flag to pass.
COMMAND_LINE_WORDS = {"bert_realformer/comparison/plan.py", "tokenization/reference.py"}
COMMAND_LINE_LAYER = ("bert_realformer/commandline/", "bert_realformer/cli/", "bert_realformer/commandline/runner.py",
                      "tokenization/__main__.py")


def _flags_in_raised_errors(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Return)) and isinstance(node.exc if isinstance(node, ast.Raise)
                                                                   else node.value, ast.Call):
            call = node.exc if isinstance(node, ast.Raise) else node.value
            if not (getattr(call.func, "id", "") or getattr(call.func, "attr", "")).endswith(("Error", "Diverged")):
                continue
            for sub in ast.walk(call):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    names = re.findall(r"(?<![\w-])--([a-z]\w+)(?![\w-])", sub.value)  # (not pip's --no-deps)
                    yield from (f"{node.lineno}: --{name}" for name in names)


def test_library_errors_name_options_not_flags():
    found = []
    for path in _library_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(COMMAND_LINE_LAYER) or relative in COMMAND_LINE_WORDS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{relative}:{where}" for where in _flags_in_raised_errors(tree)]
    assert not found, found


def test_the_flag_rule_sees_a_flag_in_an_error():
    tree = ast.parse('raise InputError(f"--max_seq_length={n}: too small")\n'
                     'return Diverged("try a lower --learning_rate")\n'
                     'raise InputError("max_seq_length: too small", options=("max_seq_length",))')
    assert list(_flags_in_raised_errors(tree)) == ["1: --max_seq_length", "2: --learning_rate"]


IMPORT_EVERY_MODULE = """
import importlib, pkgutil
import bert_realformer, modeling, tokenization
from tensorflow.python.eager import context
for package in (bert_realformer, modeling, tokenization):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not module.name.startswith("bert_realformer.cli."):  # (scripts: each defines its flags)
            importlib.import_module(module.name)
print("initialized" if context.context()._initialized else "untouched")
"""


def test_importing_the_library_runs_no_tensorflow_op():
    """Importing a module starts no TensorFlow runtime (a module-level tensor would): the test
    suite forks script processes from a server that has imported the library, and a child
    forked after the runtime's thread pools exist hangs on their locks."""
    imported = subprocess.run([sys.executable, "-c", IMPORT_EVERY_MODULE], capture_output=True, text=True,
                              timeout=300, cwd=ROOT)
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert imported.stdout.strip().splitlines()[-1] == "untouched"


def test_only_the_command_line_reads_flags():
    """absl's flags are read in `bert_realformer/commandline/` and the scripts alone: the library
    is handed options objects, so it runs the same from Python as from a shell."""
    command_line = ("bert_realformer/commandline/", "bert_realformer/cli/")
    readers = []
    for path in _library_files():
        relative = str(path.relative_to(ROOT))
        if relative.startswith(command_line) or path.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            module = getattr(node, "module", None) or ""
            if any(name == "absl.flags" or (module == "absl" and name == "flags") for name in names) \
                    or isinstance(node, ast.Name) and node.id == "FLAGS":
                readers.append(relative)
    assert sorted(set(readers)) == []
