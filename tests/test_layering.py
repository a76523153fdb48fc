"""Layering: library modules change nothing global on import; each package imports only the
packages below it (the order is `LAYERS`); only scripts use the command-line package; no script
imports another script."""

import ast
import os
import pkgutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Bottom to top; a package may import its own modules and those of lower layers only. Packages
# in one layer are independent of each other. Scripts (the repository's top-level .py files and
# `python -m` entry points) sit above all of them.
LAYERS = (
    ("bert_realformer",),                          # errors, file I/O, TFRecords, run claims
    ("modeling", "tokenization", "analysis", "realdata"),
    ("training",),                                 # the step loop, driver, optimizer, checkpoints
    ("pretraining", "tasks"),                      # what is trained: the MLM/NSP task, fine-tuning tasks
    ("comparison",),                               # studies of variants x seeds: plan, runs, results
    ("commandline",),                              # the scripts' runner and training flags
)
PACKAGES = tuple(package for layer in LAYERS for package in layer)
SCRIPTS = sorted(f[:-3] for f in os.listdir(ROOT) if f.endswith(".py"))


def _library_modules():
    names = []
    for package in PACKAGES:
        names.append(package)
        for info in pkgutil.iter_modules([os.path.join(ROOT, package)]):
            if info.name != "__main__":
                names.append(f"{package}.{info.name}")
    return names


@pytest.mark.slow
def test_importing_any_library_module_changes_no_environment_variable():
    # What the third-party libraries do on import (TensorFlow sets several variables) is
    # theirs: they are imported first.
    code = ("import os, importlib, json, sys\n"
            "import numpy, tensorflow, keras, tensorflow_text, jieba, matplotlib, absl.flags\n"
            "before = dict(os.environ)\n"
            f"for name in {_library_modules()!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


def _imports(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def _module_path(module):
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    path = path if os.path.exists(path) else os.path.join(ROOT, *module.split("."), "__init__.py")
    return path if os.path.exists(path) else None  # None: a compiled extension


def _upward_imports(module, names):
    """The imports among `names` that `module` may not make under `LAYERS`."""
    layer_of = {package: level for level, layer in enumerate(LAYERS) for package in layer}
    package = module.split(".")[0]
    return [name for name in names if name.split(".")[0] in layer_of and name.split(".")[0] != package
            and layer_of[name.split(".")[0]] >= layer_of[package]]


def test_each_package_imports_only_the_layers_below_it():
    wrong = {}
    for module in _library_modules():
        path = _module_path(module)
        if path is not None and _upward_imports(module, _imports(path)):
            wrong[module] = _upward_imports(module, _imports(path))
    assert not wrong, wrong


def test_the_layer_rule_finds_upward_and_sideways_imports():
    assert _upward_imports("training.driver", ["tasks.squad", "modeling", "training.trainer", "numpy"]) == [
        "tasks.squad"]
    assert _upward_imports("modeling.bert", ["tokenization", "bert_realformer.storage"]) == ["tokenization"]
    assert _upward_imports("pretraining.task", ["tasks.classifier_task", "training.driver"]) == [
        "tasks.classifier_task"]


def test_library_code_does_not_use_the_command_line_package_and_scripts_do_not_import_scripts():
    for module in _library_modules():
        path = _module_path(module)
        if path is None or module.startswith("commandline"):
            continue
        assert not any(name.startswith("commandline") for name in _imports(path)), module
    for script in SCRIPTS:
        imported = {name.split(".")[0] for name in _imports(os.path.join(ROOT, f"{script}.py"))}
        assert not imported & (set(SCRIPTS) - {script}), (script, imported & set(SCRIPTS))
