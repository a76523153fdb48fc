"""Users' files on any filesystem: the one I/O module (`bert_realformer.storage`) on local paths
and on TensorFlow's in-memory `ram://` filesystem (the stand-in for gs:// and HDFS), a guard
that nothing else touches users' paths with Python's own file calls, and every script end to end
with all its inputs and outputs under `ram://`, compared with the same journey on a local disk."""

import ast
import json
import os
import sys
import uuid

import pytest
import tensorflow as tf
from helpers import script_processes

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.file_patterns import expand_file_patterns
from bert_realformer.text_files import read_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
    return str(tmp_path) if request.param == "local" else f"ram://{uuid.uuid4().hex}"


def test_atomic_output_replaces_only_when_complete(root):
    path = f"{root}/out/results.txt"
    storage.write_atomic(path, "old\n")
    with pytest.raises(RuntimeError):
        with storage.atomic_output(path) as f:
            f.write("half of the new content")
            raise RuntimeError("killed mid-write")
    assert storage.read_bytes(path) == b"old\n"
    assert storage.listdir(f"{root}/out") == ["results.txt"]  # no temporary left
    with storage.atomic_output(path) as f:
        f.write("new\n")
    assert storage.read_bytes(path) == b"new\n" and storage.listdir(f"{root}/out") == ["results.txt"]


def test_queries_globs_and_renames(root):
    storage.makedirs(f"{root}/d/sub")
    for name in ("ckpt-4.index", "ckpt-4.data-00000-of-00001", "b.txt", "a.txt"):
        storage.write_atomic(f"{root}/d/{name}", name)
    # A checkpoint prefix is neither a file nor a directory (ram:// answers isdir by name prefix).
    assert not storage.isdir(f"{root}/d/ckpt-4") and not storage.isfile(f"{root}/d/ckpt-4")
    assert not storage.exists(f"{root}/d/ckpt-4")
    assert storage.isdir(f"{root}/d/sub") and storage.isfile(f"{root}/d/a.txt") and storage.size(f"{root}/d/a.txt") == 5
    assert storage.glob(f"{root}/d/*.txt") == [f"{root}/d/a.txt", f"{root}/d/b.txt"]
    storage.rename(f"{root}/d/a.txt", f"{root}/d/a.txt")  # onto itself: kept
    storage.rename(f"{root}/d/b.txt", f"{root}/d/a.txt")
    assert storage.read_bytes(f"{root}/d/a.txt") == b"b.txt" and not storage.exists(f"{root}/d/b.txt")
    assert expand_file_patterns(f" {root}/d/*.txt,{root}/d/ckpt-4.index", "input_file") == [
        f"{root}/d/a.txt", f"{root}/d/ckpt-4.index"]
    with pytest.raises(InputError, match=r"^input_file: .*/d/\*\.json matches no file$"):
        expand_file_patterns(f"{root}/d/*.json", "input_file")
    with pytest.raises(InputError, match=r"^input_file: .*/d/sub is not a file$"):
        expand_file_patterns(f"{root}/d/s*", "input_file")


def test_reading_errors_name_the_file_and_line(root):
    missing = f"{root}/nowhere/vocab.txt"
    with pytest.raises(InputError, match=r"^.*/nowhere/vocab\.txt: cannot be read \(.+\)$"):
        storage.read_bytes(missing)
    path = f"{root}/corpus.txt"
    storage.write_atomic(path, b"first line\nsecond \xff line\n")
    with pytest.raises(InputError, match=r"corpus\.txt:2: not UTF-8 \(invalid start byte 0xff at column 8\)"):
        list(read_lines(path))


def test_create_exclusive_and_upload(root, tmp_path):
    path = f"{root}/claim.json"
    assert storage.create_exclusive(path, "first")
    assert not storage.create_exclusive(path, "second")
    assert storage.read_bytes(path) == b"first"
    local = storage.local_staging_name(f"{root}/records/train.tfrecord")
    with open(local, "wb") as f:
        f.write(b"records")
    storage.upload(local, f"{root}/records/train.tfrecord")
    assert storage.read_bytes(f"{root}/records/train.tfrecord") == b"records" and not os.path.exists(local)
    assert storage.listdir(f"{root}/records") == ["train.tfrecord"]


def test_tensorflow_reads_what_storage_wrote_on_ram():
    """The files the scripts write through storage are the ones TensorFlow's readers see."""
    from bert_realformer.tfrecords import AtomicRecordWriters
    root = f"ram://{uuid.uuid4().hex}"
    with AtomicRecordWriters([f"{root}/a.tfrecord", f"{root}/b.tfrecord"]) as writers:
        for record in (b"one", b"two", b"three"):
            writers.write(record)
    assert [r.numpy() for r in tf.data.TFRecordDataset(f"{root}/a.tfrecord")] == [b"one", b"three"]
    assert [r.numpy() for r in tf.data.TFRecordDataset(f"{root}/b.tfrecord")] == [b"two"]
    assert storage.listdir(root) == ["a.tfrecord", "b.tfrecord"]


# ------------------------------------------------------------------ the guard
# Python's own file calls are allowed only here, each for files that are not users' paths.
ALLOWED = {
    "bert_realformer/storage.py": "the one module that touches users' files",
    "bert_realformer/cpus.py": "/proc and /sys files of this machine",
    "bert_realformer/realdata/peoples_daily.py": "files inside installed packages (real data)",
    "bert_realformer/realdata/sentiment.py": "files inside installed packages (real data)",
    "tokenization/__main__.py": "standard input",
}
FORBIDDEN_CALLS = {"open", "glob.glob", "glob.iglob", "os.path.exists", "os.path.isfile", "os.path.isdir",
                   "os.path.getsize", "os.replace", "os.rename", "os.makedirs", "os.mkdir", "os.listdir",
                   "os.remove", "os.unlink", "os.scandir", "os.walk", "shutil.copyfile", "shutil.copy",
                   "shutil.rmtree", "shutil.move", "np.load", "np.save", "np.loadtxt", "np.savetxt",
                   "tf.io.gfile.GFile", "tf.io.gfile.glob", "tf.io.gfile.exists", "tf.io.gfile.makedirs",
                   "tf.io.gfile.rename", "tf.io.gfile.listdir", "tf.io.gfile.remove", "tf.io.gfile.rmtree"}
FORBIDDEN_METHODS = {"savefig", "read_text", "write_text", "read_bytes", "write_bytes"}  # matplotlib, pathlib


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _project_sources():
    packages = ("bert_realformer", "modeling", "tokenization")
    for name in sorted(os.listdir(ROOT)):
        if name.endswith(".py") and name not in ("conftest.py", "setup.py"):
            yield name
    for package in packages:
        for directory, _, files in os.walk(os.path.join(ROOT, package)):
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.relpath(os.path.join(directory, name), ROOT)


def test_no_file_access_outside_the_storage_module():
    offences = []
    for relative in _project_sources():
        if relative in ALLOWED:
            continue
        with open(os.path.join(ROOT, relative), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in FORBIDDEN_CALLS or (method in FORBIDDEN_METHODS and not (name or "").startswith("storage.")):
                offences.append(f"{relative}:{node.lineno}: {name or method}(...)")
    assert not offences, "file access outside bert_realformer/storage.py:\n" + "\n".join(offences)


def test_the_guard_finds_what_it_forbids(tmp_path):
    """The guard's own check: it sees direct calls, module-qualified ones and pathlib's."""
    source = "import os\nopen('x')\nos.path.exists('y')\nPath('z').write_text('w')\nfig.savefig('p.png')\n"
    calls = [(_dotted(n.func), getattr(n.func, "attr", None)) for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.Call)]
    found = [name for name, method in calls if name in FORBIDDEN_CALLS or method in FORBIDDEN_METHODS]
    assert sorted(found, key=str) == sorted(["open", "os.path.exists", None, "fig.savefig"], key=str)


# ------------------------------------------------------------------ every script on ram://
def _journey(root, report):
    result = script_processes.run([sys.executable, os.path.join(ROOT, "tests", "helpers", "storage_journey.py"),
                             root, str(report)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(report, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.slow
def test_every_script_on_ram_matches_the_same_journey_on_a_local_disk(tmp_path):
    remote = _journey(f"ram://{uuid.uuid4().hex}", tmp_path / "ram.json")
    for step in remote["steps"]:
        assert step["status"] == 0, f"{step['script']}: {step['stderr']}"
    assert len(remote["steps"]) == 13
    local = _journey(str(tmp_path / "local"), tmp_path / "local.json")
    assert [s["status"] for s in local["steps"]] == [0] * 13
    for name, content in remote["files"].items():
        assert content is not None, f"{name} was not written on ram://"
        if name == "attention/attention_stats.json":  # it names the checkpoint it read
            ours, theirs = (json.loads(bytes.fromhex(c)) for c in (content, local["files"][name]))
            ours.pop("checkpoint"), theirs.pop("checkpoint")
            assert ours == theirs
        else:
            assert content == local["files"][name], f"{name} differs between ram:// and a local disk"
    # What each run leaves is what it leaves on a local disk, and no temporary file. (ram://
    # lists a directory `train` beside a file `train.tf_record` as one entry: a subset here.)
    for directory, names in remote["listing"].items():
        if directory not in ("export", "savedmodel"):
            assert set(names) <= set(local["listing"][directory]), directory
        assert not [name for name in names if ".tmp" in name], names
    pretrain = {"bert_config.json", "checkpoint", "eval_results.txt", "model.ckpt-4.data-00000-of-00001",
                "model.ckpt-4.index", "training_options.json", "training_state"}  # (+ eval/, train/)
    assert pretrain <= set(remote["listing"]["pretrain"]) <= pretrain | {"train"}
    assert remote["listing"]["hf"] == ["config.json", "model.safetensors", "special_tokens_map.json",
                                       "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    assert len(remote["listing"]["export"]) == 1 and len(remote["listing"]["savedmodel"]) == 1
    # The SavedModels exported to ram:// serve what the local ones serve.
    assert remote["served"] == local["served"] and set(remote["served"]) == {"export", "savedmodel"}
