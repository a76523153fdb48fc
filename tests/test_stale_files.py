"""What an earlier run left in OUTPUT_DIR never changes a later run silently: a run refused for
its data leaves no label list to misread the corrected data with; a best checkpoint whose
best.json is gone is named in one line, not replaced by the last weights without a word; a
damaged best checkpoint is said as the run resumes, before it trains, its training state intact."""

import os

import pytest
from helpers.in_process import completed_in_process
from helpers.tiny_classifier_runs import TEXTS, classifier_flags

pytestmark = pytest.mark.slow  # the script end to end


def _write(data, split, labels):
    data.mkdir(exist_ok=True)
    (data / f"{split}.tsv").write_text("".join(f"{label}\t{TEXTS[i % len(TEXTS)]}\n" for i, label in enumerate(labels)))


def test_a_run_refused_for_its_data_leaves_no_label_list_behind(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    _write(data, "train", ["0", "1"] * 4)
    _write(data, "dev", ["neg", "pos"] * 2)
    refused = completed_in_process("run_classifier.py", *classifier_flags(data, out, "--do_train", "--do_eval"))
    assert refused.returncode == 2
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {data}/dev.tsv") and "unknown label 'neg'" in last, last
    assert not (out / "label_list.txt").exists()
    _write(data, "train", ["neg", "pos"] * 4)  # (the corrected data)
    corrected = completed_in_process("run_classifier.py", *classifier_flags(
        data, out, "--do_train", "--do_eval", "--train_batch_size=4", "--num_train_epochs=1"))
    assert corrected.returncode == 0, corrected.stderr[-3000:]
    assert (out / "label_list.txt").read_text() == "neg\npos\n"


def test_a_best_checkpoint_without_its_record_is_named_not_replaced(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    for split in ("train", "dev", "test"):
        _write(data, split, ["good", "bad"] * 4)
    trained = completed_in_process("run_classifier.py", *classifier_flags(
        data, out, "--do_train", "--do_eval", "--train_batch_size=4", "--num_train_epochs=2",
        "--eval_every_steps=2"))
    assert trained.returncode == 0, trained.stderr[-3000:]
    kept = sorted(name for name in os.listdir(out / "best") if name.endswith(".index"))
    assert len(kept) == 1
    (out / "best" / "best.json").unlink()
    predicted = completed_in_process("run_classifier.py", *classifier_flags(data, out, "--do_predict"))
    assert predicted.returncode == 2
    prefix = f"{out}/best/{kept[0][:-len('.index')]}"
    assert predicted.stderr.strip().splitlines()[-1] == (
        f"error: {out}/best holds {os.path.basename(prefix)} but not best.json, which says which checkpoint is the "
        f"best: restore it, give --init_checkpoint={prefix} in a new --output_dir for that checkpoint, or "
        "--use_best_checkpoint=false for the weights training ended with")
    assert not (out / "test_results.tsv").exists()


def test_a_damaged_best_checkpoint_is_said_before_a_resumed_run_trains(tmp_path):
    """Trained 4 steps, its best checkpoint cut short, then asked for 4 epochs: refused before a
    step, not after the 4 more (the best one's training state by then rotated out)."""
    data, out = tmp_path / "data", tmp_path / "out"
    for split in ("train", "dev"):
        _write(data, split, ["good", "bad"] * 4)

    def command(epochs):
        return classifier_flags(data, out, "--do_train", "--do_eval", "--train_batch_size=4",
                                f"--num_train_epochs={epochs}", "--eval_every_steps=2")
    trained = completed_in_process("run_classifier.py", *command(2))
    assert trained.returncode == 0, trained.stderr[-3000:]
    data_file = next(path for path in (out / "best").iterdir() if ".data-" in path.name)
    data_file.write_bytes(data_file.read_bytes()[:100])
    states = {path.name: path.read_bytes() for path in (out / "training_state").iterdir()}
    longer = completed_in_process("run_classifier.py", *command(4))
    assert longer.returncode == 2
    last = longer.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {out}/best/model.ckpt-") and "cannot read checkpoint" in last, last
    assert last.endswith(f"it is this run's best checkpoint: restore it, or remove {out}/best to go on without it "
                         "(the next evaluation keeps a new best)"), last
    assert {path.name: path.read_bytes() for path in (out / "training_state").iterdir()} == states
    assert not (out / "model.ckpt-8.index").exists()
