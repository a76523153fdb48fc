"""Layering: library modules change nothing global on import; each unit imports only the units
below it (the order is `LAYERS`), at module level or inside a function; no module imports
itself through others; only scripts use the command-line package; each wrapper at the root
imports its own script module only."""

import ast
import os
import pkgutil
import sys

import pytest
from helpers import script_processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Bottom to top; a unit may import its own modules and those of lower layers only. Units in one
# layer are independent of each other. A unit is a top-level package (`modeling`, `tokenization`:
# the original's module names), a subpackage of `bert_realformer`, or `bert_realformer`'s own
# modules (the bottom). The repository's top-level .py files are wrappers of `bert_realformer.cli`.
LAYERS = (
    ("bert_realformer",),                               # errors, file I/O, TFRecords, run claims
    ("modeling", "tokenization", "bert_realformer.realdata"),
    ("bert_realformer.checkpoints",),                   # weight formats: TF1, Hugging Face, KerasHub, states
    ("bert_realformer.inference",),                     # prediction, its engines and kernels, export
    ("bert_realformer.training",),                      # the spine: driver, hooks, step loop, optimizer
    ("bert_realformer.finetuning", "bert_realformer.pretraining"),  # the two ways to train
    ("bert_realformer.tasks",),                         # the fine-tuning tasks
    ("bert_realformer.comparison",),                    # studies of variants x seeds
    ("bert_realformer.commandline",),                   # the training scripts' shared flags
    ("bert_realformer.cli",),                           # the scripts, one module each
)
UNITS = tuple(unit for layer in LAYERS for unit in layer)
# The package's face: `bert_realformer.from_pretrained` resolves on first use (a module
# `__getattr__`) to the checkpoints layer's loader, the name users call at the top as they call
# KerasHub's and transformers'; importing `bert_realformer` still imports nothing above it.
FACE = {"bert_realformer": {"bert_realformer.checkpoints.pretrained"}}
SCRIPTS = sorted(f[:-3] for f in os.listdir(ROOT) if f.endswith(".py"))


def _unit(module):
    """The layering unit `module` belongs to (None: not this project's); a package's `__main__`
    (`python -m tokenization`) is a script."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "bert_realformer.cli"
    if parts[0] == "bert_realformer" and len(parts) > 1 and f"bert_realformer.{parts[1]}" in UNITS:
        return f"bert_realformer.{parts[1]}"
    return parts[0] if parts[0] in UNITS else None


def _library_modules(with_main=False):
    """Every module of the units (a unit's `__main__` too when `with_main`)."""
    names = []
    for unit in UNITS:
        directory = os.path.join(ROOT, *unit.split("."))
        names.append(unit)
        for info in pkgutil.iter_modules([directory]):
            name = f"{unit}.{info.name}"
            if (info.name != "__main__" or with_main) and _unit(name) == unit:
                names.append(name)
    return names


@pytest.mark.slow
def test_importing_any_library_module_changes_no_environment_variable():
    # (The scripts' modules define their flags on import: they are the scripts, not the library.)
    # What the third-party libraries do on import (TensorFlow sets several variables) is
    # theirs: they are imported first.
    code = ("import os, importlib, json, sys\n"
            "import numpy, tensorflow, keras, tensorflow_text, jieba, matplotlib, absl.flags\n"
            "before = dict(os.environ)\n"
            f"for name in {[m for m in _library_modules() if not m.startswith('bert_realformer.cli')]!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",)}
    result = script_processes.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


def _imports(path):
    """Every module `path` imports, at module level or inside a function: `from p import m`
    counts as `p.m` when `m` is a module."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                if _module_path(f"{node.module}.{alias.name}") is not None:
                    yield f"{node.module}.{alias.name}"


def _module_path(module):
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    path = path if os.path.exists(path) else os.path.join(ROOT, *module.split("."), "__init__.py")
    return path if os.path.exists(path) else None  # None: a compiled extension, or not a module


def _upward_imports(module, names):
    """The imports among `names` that `module` may not make under `LAYERS`."""
    layer_of = {unit: level for level, layer in enumerate(LAYERS) for unit in layer}
    unit = _unit(module)
    return [name for name in names if _unit(name) is not None and _unit(name) != unit
            and layer_of[_unit(name)] >= layer_of[unit]]


def _circles(graph):
    """The import cycles of `graph` ({module: modules it imports}), each as a list of modules."""
    found, state = [], {}

    def visit(module, path):
        state[module] = "open"
        for name in sorted(graph.get(module, ())):
            if state.get(name) == "open":
                found.append(path[path.index(name):] + [name])
            elif name not in state:
                visit(name, path + [name])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def _import_graph():
    modules = _library_modules(with_main=True)
    graph = {}
    for module in modules:
        path = _module_path(module)
        if path is not None:
            package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
            graph[module] = {name for name in _imports(path) if name in modules and name != package
                             and not module.startswith(name + ".")}
    return graph


def test_each_package_imports_only_the_layers_below_it():
    wrong = {}
    for module in _library_modules(with_main=True):
        path = _module_path(module)
        upward = set(_upward_imports(module, _imports(path))) - FACE.get(module, set()) if path else set()
        if upward:
            wrong[module] = sorted(upward)
    assert not wrong, wrong


def test_no_module_imports_itself_through_others():
    assert _circles(_import_graph()) == []


def test_the_layer_rule_finds_upward_and_sideways_imports_and_circles():
    assert _upward_imports("bert_realformer.training.driver", [
        "bert_realformer.tasks.squad.reading", "modeling", "bert_realformer.training.trainer", "numpy"]) == [
        "bert_realformer.tasks.squad.reading"]
    assert _upward_imports("modeling.bert", ["tokenization", "bert_realformer.storage"]) == ["tokenization"]
    assert _upward_imports("bert_realformer.pretraining.task", [
        "bert_realformer.tasks.classification.task", "bert_realformer.training.driver"]) == [
        "bert_realformer.tasks.classification.task"]
    assert _upward_imports("bert_realformer.storage", ["bert_realformer.training.driver"]) == [
        "bert_realformer.training.driver"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_only_scripts_use_the_command_line_package_and_the_wrappers_only_their_script():
    for module in _library_modules():
        path = _module_path(module)
        if path is None or module.startswith(("bert_realformer.commandline", "bert_realformer.cli")):
            continue
        assert not any(name.startswith("bert_realformer.commandline") for name in _imports(path)), module
    for script in SCRIPTS:
        imported = set(_imports(os.path.join(ROOT, f"{script}.py")))
        assert imported == {f"bert_realformer.cli.{script}"}, (script, imported)


def test_the_makefiles_python_snippets_import_what_the_install_provides():
    """`make demo` and `make study` find the Chinese vocabulary with `$(PY) -c '...'`; a module
    that moved (top-level `realdata` went under `bert_realformer`) broke them without a test."""
    import re
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        snippets = re.findall(r"\$\(PY\) -c '([^']*)'", f.read())
    assert snippets
    for snippet in snippets:
        imports = "\n".join(part.strip() for part in snippet.split(";") if re.match(r"\s*(from|import) ", part))
        assert imports, snippet
        exec(compile(imports, "Makefile", "exec"), {})  # raises ModuleNotFoundError for a stale name


@pytest.mark.slow
def test_modeling_loads_no_file_io_and_no_tensorflow_on_the_jax_backend():
    # (The model runs where TensorFlow is absent; configs are read in bert_realformer.checkpoints.)
    code = ("import sys, modeling\n"
            "print(sorted(m for m in sys.modules if m.startswith(('bert_realformer', 'tensorflow'))))\n")
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = script_processes.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "['bert_realformer', 'bert_realformer.errors']"
