"""Layering: library modules change nothing global on import and never use the scripts'
runner; no script imports another script."""

import ast
import os
import pkgutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("bert_realformer", "modeling", "tokenization", "pretraining", "tasks", "training", "analysis",
            "realdata")
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


def test_library_code_does_not_use_the_scripts_runner_and_scripts_do_not_import_scripts():
    for module in _library_modules():
        if module.startswith("bert_realformer"):
            continue
        path = os.path.join(ROOT, *module.split(".")) + ".py"
        path = path if os.path.exists(path) else os.path.join(ROOT, *module.split("."), "__init__.py")
        if not os.path.exists(path):  # a compiled extension
            continue
        assert "bert_realformer.cli" not in set(_imports(path)), module
    for script in SCRIPTS:
        imported = {name.split(".")[0] for name in _imports(os.path.join(ROOT, f"{script}.py"))}
        assert not imported & (set(SCRIPTS) - {script}), (script, imported & set(SCRIPTS))
