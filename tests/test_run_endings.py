"""The scripts end to end when something goes wrong: a diverging run, a damaged input file, an
output directory that cannot be written, a bad flag; each ends in one `error:` line, a
non-zero status, and nothing lost or half-written. And the label order a classifier run
records, used by a predict run in a later process and by the SavedModel."""

import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import script_processes
from helpers.pretraining_runs import RECORDS, ROOT, command, latest_saved_step, run
from helpers.serving import serve

from bert_realformer.checkpoints.config_files import read_config

pytestmark = pytest.mark.slow  # the scripts in subprocesses

DATA = os.path.join(ROOT, "tests", "data")
SCRIPTS = ("run_pretraining.py", "run_classifier.py", "run_squad.py", "run_ner.py", "run_multiple_choice.py",
           "create_pretraining_data.py", "extract_features.py", "convert_checkpoint.py", "analyze_attention.py")


def last_line(result):
    return result.stderr.strip().splitlines()[-1]


def _export_command(tmp_path, output_dir, export_dir):
    """run_classifier.py exporting a SavedModel of a 3-label tiny classifier (no training)."""
    _tiny_classifier_checkpoint(tmp_path / "trained")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "labels.txt").write_text("0\n1\n2\n")
    return [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic",
            f"--data_dir={tmp_path}/data", f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
            f"--label_file={tmp_path}/data/labels.txt", f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json",
            "--max_seq_length=16", f"--init_checkpoint={tmp_path}/trained", f"--output_dir={output_dir}",
            f"--export_dir={export_dir}"]


def _tiny_classifier_checkpoint(directory):
    """An untrained 3-label tiny classifier as a TF1 checkpoint with its config and vocabulary."""
    import modeling
    from bert_realformer import checkpoints
    config = read_config(f"{DATA}/bert_postln_tiny/bert_config.json")
    model = modeling.BertClassifier(config, 3)
    model.build()
    checkpoints.save_tf1_checkpoint(model, str(directory / "bert_model.ckpt"))
    shutil.copy(f"{DATA}/bert_postln_tiny/bert_config.json", directory / "bert_config.json")
    shutil.copy(f"{DATA}/bert_postln_tiny/vocab.txt", directory / "vocab.txt")


# ---------------------------------------------------------------------- divergence
def test_a_diverging_pretraining_run_exits_non_zero_and_writes_no_weights_after_it(tmp_path):
    result = run(command(tmp_path, "--do_train", "--do_eval", "--num_train_steps=60", "--save_checkpoints_steps=2",
                         "--learning_rate=1e4", "--max_eval_steps=2"))
    assert result.returncode == 3, result.stderr[-3000:]
    line = last_line(result)
    assert line.startswith("error: training diverged at step ") and "--learning_rate (now 10000)" in line
    out = tmp_path / "out"
    assert not list(out.glob("model.ckpt-*")) and not (out / "eval_results.txt").exists()
    step = int(line.split("at step ")[1].split(":")[0])
    saved = latest_saved_step(out / "training_state")
    assert saved == (step - 1) // 2 * 2 and f"last good training state: {out}/training_state/ckpt-{saved}" in line


# ---------------------------------------------------------------------- damaged input
def test_a_truncated_input_file_is_named_up_front_or_when_training_meets_it(tmp_path):
    data = open(RECORDS, "rb").read()
    truncated = tmp_path / "part-2.tfrecord"
    truncated.write_bytes(data[:len(data) * 2 // 3 + 100])  # cut inside a record; those before it read well
    files = f"{RECORDS},{truncated}"
    checked = run(command(tmp_path, "--do_train", "--num_train_steps=400", "--check_input_files",
                          input_file=files))
    assert checked.returncode == 2
    assert last_line(checked).startswith(f"error: --input_file: {truncated}: truncated record at offset ")
    assert not (tmp_path / "out" / "training_state").exists()

    met = run(command(tmp_path, "--do_train", "--num_train_steps=400", "--save_checkpoints_steps=10",
                      input_file=files))
    assert met.returncode == 2, met.stderr[-3000:]
    line = last_line(met)
    assert line.startswith(f"error: --input_file: {truncated}: truncated record at offset "), line
    step = latest_saved_step(tmp_path / "out" / "training_state")
    assert step >= 10 and line.endswith(f"the training state {tmp_path}/out/training_state/ckpt-{step} is intact")
    assert "Traceback" not in met.stderr


# ---------------------------------------------------------------------- unwritable output directories
def _read_only(directory, cmd):
    """`cmd` run where `directory` is read-only: a read-only tmpfs mounted over it in a private
    mount namespace (which denies root too), or, for other users, a directory without write
    permission."""
    directory.mkdir()
    if os.geteuid() == 0 and shutil.which("unshare"):
        if script_processes.run(["unshare", "-m", "true"], capture_output=True).returncode == 0:
            return ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o ro none "$0" && exec "$@"', str(directory), *cmd]
    if os.geteuid() == 0:
        pytest.skip("a read-only directory for root needs unshare -m")
    directory.chmod(0o555)
    return cmd


@pytest.mark.parametrize("script", ["run_pretraining.py", "run_classifier.py"])
def test_an_unwritable_output_dir_is_one_line_before_anything_is_built(tmp_path, script):
    read_only = tmp_path / "read_only"
    if script == "run_pretraining.py":
        cmd = command(tmp_path, "--do_train", "--num_train_steps=2")
        cmd = [c for c in cmd if not c.startswith("--output_dir")] + [f"--output_dir={read_only}/out"]
    else:
        data = tmp_path / "data"
        data.mkdir()
        (data / "train.tsv").write_text("text\tlabel\nhello\t1\n")
        cmd = [sys.executable, os.path.join(ROOT, script), "--task_name=generic", f"--data_dir={data}",
               f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
               f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json", "--do_train", "--max_seq_length=16",
               f"--output_dir={read_only}/out"]
    result = run(_read_only(read_only, cmd))
    assert result.returncode == 2, result.stderr[-3000:]
    reason = last_line(result).split(" cannot be written: ")
    assert reason[0] == f"error: --output_dir={read_only}/out" and reason[1] in (
        "Read-only file system", "Permission denied")
    assert "weights:" not in result.stderr and "Traceback" not in result.stderr

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cmd = [c if not c.startswith("--output_dir") else f"--output_dir={blocker}/out" for c in cmd]
    result = run(cmd)
    assert result.returncode == 2 and last_line(result) == (
        f"error: --output_dir={blocker}/out cannot be written: Not a directory")


@pytest.mark.parametrize("where", ["training_state", "export_dir", "output_file"])
def test_every_output_location_is_checked_before_the_work(tmp_path, where):
    """A read-only OUTPUT_DIR/training_state, --export_dir or --output_file directory stops the
    run with one line before any step, any training or any tokenizing."""
    read_only = tmp_path / "read_only"
    if where == "training_state":
        (tmp_path / "out").mkdir()
        read_only = tmp_path / "out" / "training_state"
        cmd = command(tmp_path, "--do_train", "--num_train_steps=2")
        expected = f"error: --output_dir={read_only}"
    elif where == "export_dir":
        data = tmp_path / "data"
        data.mkdir()
        (data / "train.tsv").write_text("text\tlabel\nhello\t1\n")
        cmd = [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic", f"--data_dir={data}",
               f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
               f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json", "--do_train", "--max_seq_length=16",
               f"--output_dir={tmp_path}/out", f"--export_dir={read_only}/serving"]
        expected = f"error: --export_dir={read_only}/serving"
    else:
        cmd = [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
               f"--input_file={DATA}/pretraining_data/input.txt", f"--output_file={read_only}/data/train.tfrecord",
               f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt", "--progress"]
        expected = f"error: --output_file={read_only}/data"
    result = run(_read_only(read_only, cmd))
    assert result.returncode == 2, result.stderr[-3000:]
    line = last_line(result)
    assert line.startswith(expected + " cannot be written: "), line
    assert "step 1/" not in result.stderr and "tokenizing:" not in result.stderr and "wrote" not in result.stderr
    assert "Traceback" not in result.stderr


def test_a_best_dir_made_read_only_mid_training_ends_in_one_line_with_its_steps_saved(tmp_path):
    """OUTPUT_DIR/best turns read-only once training has kept its first best (a bind mount made
    read-only, in a private mount namespace): the next better evaluation cannot write its
    checkpoint. The run ends in one line naming it, exit 7, the training state of that step saved
    (saves are otherwise only at the end here); run again, it resumes there and ends as the run
    that was never stopped ends."""
    from helpers.tiny_classifier_runs import classifier_flags
    if os.geteuid() != 0 or script_processes.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("making a directory read-only under a running process needs root and unshare -m")
    data = tmp_path / "data"
    data.mkdir()
    texts = ["the cat sat on the mat", "a big dog ran fast", "it was a bad day", "we read a good book"]
    rows = "".join(f"{'good' if i % 2 else 'bad'}\t{texts[i % 4]} {i}\n" for i in range(16))
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text(rows)

    def command(out):
        return [sys.executable, os.path.join(ROOT, "run_classifier.py"), *classifier_flags(
            data, out, "--do_train", "--do_eval", "--train_batch_size=4", "--num_train_epochs=6",
            "--eval_every_steps=2", "--keep_best_by=loss", "--save_checkpoints_steps=1000", "--learning_rate=1e-3")]
    out, best = tmp_path / "out", tmp_path / "out" / "best"
    # (a read-only remount is refused, "busy", while a file under it is open for writing: try again)
    script = ('"$@" & pid=$!; while [ ! -f "$0/best.json" ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done; '
              'mount --bind "$0" "$0" && until mount -o remount,ro,bind "$0" 2>/dev/null; do '
              'kill -0 $pid 2>/dev/null || break; sleep 0.01; done; wait $pid')
    stopped = run(["unshare", "-m", "sh", "-c", script, str(best), *command(out)])
    assert stopped.returncode == 7, stopped.stderr[-3000:]
    line = last_line(stopped)
    failed = int(line.split("/best/model.ckpt-")[1].split(" ")[0])
    assert line == (f"error: {best}/model.ckpt-{failed} cannot be written: read-only file system; the files being "
                    f"written were removed and the training state {out}/training_state/ckpt-{failed} is intact: run "
                    "the same command again"), line
    assert failed > 0 and "Traceback" not in stopped.stderr
    assert not [name for name in os.listdir(best) if ".tmp" in name]
    assert not list((out / "training_state").glob("*_temp*"))

    resumed = run(command(out))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"eval at step {failed}:" in resumed.stderr  # (the evaluation that could not keep its checkpoint)
    whole = run(command(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert (out / "eval_results.txt").read_text() == (tmp_path / "whole" / "eval_results.txt").read_text()
    assert (best / "best.json").read_text() == (tmp_path / "whole" / "best" / "best.json").read_text()


# ---------------------------------------------------------------------- flags
def test_the_shared_flags_are_in_help_and_every_bad_flag_is_an_error_line():
    asked = run([sys.executable, os.path.join(ROOT, "run_classifier.py"), "--help"])
    assert asked.returncode == 0, asked.stderr[-2000:]  # (absl's own --help exits with 1)
    help_text = asked.stdout
    assert help_text.startswith("Fine-tuning for sentence") and "python run_classifier.py --task_name=" in help_text
    # The script's own flags (the original's among them), then the fine-tuning ones, then the training ones.
    sections = {title: help_text.index(f"\n{title}:\n") for title in (
        "run_classifier.py's own flags", "fine-tuning flags (the same in every fine-tuning script)",
        "training flags (the same in every training script)")}
    assert list(sections.values()) == sorted(sections.values())
    starts = sorted(sections.values())
    for flag, section in (("task_name", 0), ("data_dir", 0), ("[no]do_train", 0), ("init_checkpoint", 0),
                          ("learning_rate", 0), ("doc_stride", 0), ("eval_every_steps", 1), ("on_stuck", 1),
                          ("iterations_per_loop", 2), ("distribution_strategy", 2), ("seed", 2)):
        assert help_text.count(f"\n  --{flag}:") == 1, flag
        at = help_text.index(f"\n  --{flag}:")
        assert starts[section] < at and (section == 2 or at < starts[section + 1]), flag
    assert "estimator" not in help_text
    for script in SCRIPTS:
        result = run([sys.executable, os.path.join(ROOT, script), "--no_such_flag=1"])
        assert result.returncode == 2, script
        assert result.stderr.strip().splitlines() == [
            "error: Unknown command line flag 'no_such_flag' (see --help)"], (script, result.stderr)


# ---------------------------------------------------------------------- the label order
def test_integer_labels_in_order_recorded_for_a_later_predict_run_and_the_savedmodel(tmp_path):
    """A generic task with labels 0..11: label_list.txt lists them as integers sort, the columns
    of test_results.tsv follow it; a predict run in a later process, without the training file,
    takes the order from label_list.txt and writes the same file; the SavedModel's `label`
    output is the label of the most probable column."""
    rng = random.Random(0)
    words = "the cat sat on a mat dog played in snow old man reads it rained".split()
    data, out, export = tmp_path / "data", tmp_path / "out", tmp_path / "export"
    data.mkdir()
    rows = {split: [(" ".join(rng.choices(words, k=5)), i % 12) for i in range(n)]
            for split, n in (("train", 48), ("test", 12))}
    for split, part in rows.items():
        (data / f"{split}.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in part))
    common = ["--task_name=generic", f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
              f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json",
              f"--init_checkpoint={DATA}/bert_postln_tiny/bert_model.ckpt", "--max_seq_length=16",
              f"--output_dir={out}"]
    script = os.path.join(ROOT, "run_classifier.py")
    trained = run([sys.executable, script, *common, f"--data_dir={data}", "--do_train", "--do_predict",
                   "--train_batch_size=8", "--num_train_epochs=1", "--learning_rate=1e-3", f"--export_dir={export}"])
    assert trained.returncode == 0, trained.stderr[-3000:]
    labels = (out / "label_list.txt").read_text().splitlines()
    assert labels == [str(i) for i in range(12)]
    first = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert first.shape == (12, 12)

    (data / "train.tsv").unlink()
    (out / "test_results.tsv").unlink()
    again = run([sys.executable, script, *common, f"--data_dir={data}", "--do_predict"])
    assert again.returncode == 0, again.stderr[-3000:]
    np.testing.assert_array_equal(np.loadtxt(out / "test_results.tsv", delimiter="\t"), first)

    served = serve(export, [text for text, _ in rows["test"]])["label"]
    assert served == [labels[i] for i in first.argmax(1)]


# ---------------------------------------------------------------------- a full disk
def _on_a_small_disk(directory, script, size):
    """`script` (sh) run where `directory` is a tmpfs of `size` KiB, in a private mount namespace."""
    directory.mkdir()
    if os.geteuid() != 0 or not shutil.which("unshare") or \
            script_processes.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("a small disk needs root and unshare -m")
    return ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size={size}k none "$0" && {script}', str(directory)]


@pytest.mark.parametrize("writer", ["create_pretraining_data", "feature_cache", "training_state", "export"])
def test_a_full_disk_is_one_line_leaves_no_temporary_and_a_rerun_succeeds(tmp_path, writer):
    disk = tmp_path / "disk"
    # KiB: the disk, and what is free on it until the filler goes
    size, left = {"create_pretraining_data": (256, 20), "feature_cache": (1024, 60),
                  "training_state": (40960, 6144), "export": (6144, 1024)}[writer]
    if writer == "export":  # a SavedModel of 3 MB
        cmd = _export_command(tmp_path, disk / "out", disk / "export")
    elif writer == "training_state":  # 4 MB of weights and 8 MB of Adam slots do not fit in 6 MB
        cmd = [c if not c.startswith("--output_dir") else f"--output_dir={disk}/out"
               for c in command(tmp_path, "--do_train", "--num_train_steps=2", "--save_checkpoints_steps=1")]
    elif writer == "create_pretraining_data":
        cmd = [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
               f"--input_file={DATA}/pretraining_data/input.txt", f"--output_file={disk}/train.tfrecord",
               f"--vocab_file={DATA}/tokenization/vocab_en_uncased.txt", "--max_seq_length=64", "--dupe_factor=1"]
    else:
        data = tmp_path / "data"
        data.mkdir()
        rows = [" ".join(random.Random(i).choices("the cat sat on a mat dog ran".split(), k=40)) for i in range(600)]
        (data / "train.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(rows)))
        cmd = [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic", f"--data_dir={data}",
               f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
               f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json", "--do_train", "--max_seq_length=64",
               "--num_train_epochs=0.01", f"--output_dir={disk}/out"]
    command_line = " ".join(f"'{c}'" for c in cmd)
    script = (f'head -c {(size - left) * 1024} /dev/zero > "$0/filler"; '
              f'{command_line} 2> "$0/../first.err"; echo "first $?"; '
              'find "$0" | tr "\\n" " "; echo; rm "$0/filler"; '
              f'{command_line} 2> "$0/../second.err"; echo "second $?"')
    result = run(_on_a_small_disk(disk, script, size))
    lines = result.stdout.splitlines()
    first = (tmp_path / "first.err").read_text()
    assert "first 4" in lines, result.stdout + first[-3000:]
    assert first.strip().splitlines()[-1].startswith("error: no space left on the device"), first[-3000:]
    assert "Traceback" not in first
    assert ".tmp-" not in lines[1] and "_temp" not in lines[1], lines[1]  # no temporary left behind
    if writer == "training_state":  # the step was made; nothing of its state was kept
        assert "step 1/2" in first and "ckpt-1" not in lines[1], lines[1]
        assert first.strip().endswith("no training state was saved yet: run the same command again after freeing "
                                      "space"), first[-3000:]
    if writer == "export":  # no version directory, whole or not
        assert "export/" not in lines[1], lines[1]
    assert "second 0" in lines, result.stdout + (tmp_path / "second.err").read_text()[-3000:]


# ---------------------------------------------------------------------- the machine's limits
def test_a_batch_too_large_for_memory_or_for_a_tensor_is_one_line(tmp_path):
    """Out of memory (a 6 GB address space for masked LM logits of 8.5 GB) ends with status 5
    naming the allocation and the flags to lower; a batch whose logits no tensor can index is
    refused before any work, saying what fits."""
    import resource

    def six_gigabytes():
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    cmd = command(tmp_path, "--do_train", "--num_train_steps=2", "--train_batch_size=7000")
    result = script_processes.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=six_gigabytes)
    assert result.returncode == 5, result.stderr[-3000:]
    line = last_line(result)
    assert line.startswith("error: out of memory (OOM when allocating tensor with shape[") and (
        "use a smaller --train_batch_size (with --gradient_accumulation_steps for the same update)" in line), line
    assert line.endswith("no training state was saved yet: run the same command again"), line
    assert "Traceback" not in result.stderr

    huge = run(command(tmp_path, "--do_train", "--num_train_steps=2", "--train_batch_size=200000"))
    assert huge.returncode == 2, huge.stderr[-3000:]
    assert last_line(huge) == (  # 10 predictions x 30522 ids per example: 2**31 // 305220 = 7035
        "error: --train_batch_size=200000 is too large for the device: one replica's masked LM logits would hold "
        "61,044,000,000 values, more than the 2,147,483,647 a tensor can index; at most 7,035 fit "
        "(--gradient_accumulation_steps makes larger updates)")
    assert "weights:" not in huge.stderr


def test_an_unreadable_init_checkpoint_says_permission_denied(tmp_path):
    """A checkpoint directory the user cannot read is named as such, not as one holding no
    checkpoint (root is denied too: its capability to override permissions is dropped)."""
    _tiny_classifier_checkpoint(tmp_path / "locked")
    checkpoint = tmp_path / "locked" / "bert_model.ckpt"
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("text\tlabel\nhello\t1\n")
    as_user = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("denying root a read needs setpriv")
        as_user = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    (tmp_path / "locked").chmod(0)
    try:
        for given in (tmp_path / "locked", checkpoint):
            result = run([*as_user, sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic",
                          f"--data_dir={data}", f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
                          f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json", "--do_train",
                          "--max_seq_length=16", f"--init_checkpoint={given}", f"--output_dir={tmp_path}/out"])
            assert result.returncode == 2, result.stderr[-3000:]
            assert last_line(result) == f"error: {tmp_path / 'locked'}: cannot be read (Permission denied)"
    finally:
        (tmp_path / "locked").chmod(0o755)


# ---------------------------------------------------------------------- signals outside training
@pytest.mark.parametrize("phase", ["export", "conversion", "create_pretraining_data"])
def test_sigterm_outside_training_is_one_line_143_with_no_temporary_left(tmp_path, phase):
    """SIGTERM while a SavedModel is exported, a checkpoint converted or data made: one line,
    status 143, no temporary left, no output half-written."""
    import signal
    import time
    if phase == "export":
        cmd = _export_command(tmp_path, tmp_path / "out", tmp_path / "export")
        ready = "weights:"
    elif phase == "conversion":  # (a SavedModel: seconds of tracing after the weights are read)
        _tiny_classifier_checkpoint(tmp_path / "trained")
        cmd = [sys.executable, os.path.join(ROOT, "convert_checkpoint.py"), "--from=tf1", "--to=savedmodel",
               f"--input={tmp_path}/trained/bert_model.ckpt", f"--output={tmp_path}/export", "--max_seq_length=16"]
        ready = "writing --to=savedmodel"
    else:
        from bert_realformer import realdata
        corpus = tmp_path / "corpus.txt"
        realdata.write_peoples_daily_corpus(str(corpus), max_documents=400)
        cmd = [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"), f"--input_file={corpus}",
               f"--output_file={tmp_path}/out/train.tfrecord", f"--vocab_file={DATA}/tokenization/vocab_zh.txt",
               "--do_whole_word_mask", "--chinese_word_segmentation=jieba", "--progress", "--num_workers=1"]
        ready = "tokenizing:"
    proc = script_processes.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = b""
    deadline = time.time() + 120
    while ready.encode() not in seen and time.time() < deadline and proc.poll() is None:
        seen += os.read(proc.stderr.fileno(), 4096)
    assert ready.encode() in seen, seen.decode()[-2000:]
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    stderr = (seen + rest).decode()
    assert proc.returncode == 143, stderr[-3000:]
    last = stderr.strip().splitlines()[-1].split("\r")[-1]
    assert last.startswith("error: stopped by SIGTERM; the files being written were removed"), last
    assert "Traceback" not in stderr
    leftovers = [os.path.join(root, name) for root, dirs, names in os.walk(tmp_path)
                 for name in names + dirs if ".tmp" in name or "_temp" in name or "tempstate" in name]
    assert leftovers == []
    # Nothing new, also when the signal met a GC callback (where Python ignores it) and the work went on.
    if phase == "export":
        assert not (tmp_path / "export").exists() or os.listdir(tmp_path / "export") == []
    elif phase == "conversion":
        assert not (tmp_path / "export").exists()
    else:
        assert not (tmp_path / "out" / "train.tfrecord").exists()


def test_tensorflows_start_up_lines_are_left_out_unless_asked_for(tmp_path):
    """A script's console holds its own lines only: the block TensorFlow's native libraries
    print as it is imported is caught and left out; `--verbosity` shows it again."""
    from bert_realformer.startup_lines import STARTUP_LINE
    for split in ("train", "test"):
        (tmp_path / f"{split}.tsv").write_text("text\tlabel\nhello\t1\nworld\t0\n")
    cmd = [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic", f"--data_dir={tmp_path}",
           f"--init_checkpoint={DATA}/bert_postln_tiny", "--do_predict", f"--output_dir={tmp_path}/out",
           "--max_seq_length=16"]
    def fresh_process(cmd):  # (not `run`'s processes forked after TensorFlow's import)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)

    result = fresh_process(cmd)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: {DATA}/bert_postln_tiny/bert_model.ckpt lacks weights the model needs: output_weights, "
        "output_bias (a pretrained checkpoint without this task's head? train with --do_train first)"
    ], result.stderr[-3000:]
    asked = fresh_process([*cmd, "--verbosity=0"])
    assert any(STARTUP_LINE.fullmatch(line) for line in asked.stderr.splitlines()), asked.stderr[-3000:]
    assert last_line(asked) == last_line(result)
