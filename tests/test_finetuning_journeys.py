"""Fine-tuning runs a practitioner can trust, end to end in subprocesses: the best checkpoint kept
during training serves eval, predict and the SavedModel, and a later predict-only run from it
in a new process gives the same dev metrics; a SIGKILLed run resumed picks the same best step as
an uninterrupted one (classification on real review sentiment; multiple choice on QuaRel with
early stopping); a run made to stick restarts with the next seed and says so in its results; a
SavedModel converted from a windowed run's directory serves with the run's windows."""

import json
import os
import sys

import numpy as np
import pytest
from conftest import allennlp_fixture
from helpers import script_processes
from helpers.pretraining_runs import killed_after_a_save
from helpers.serving import serve
from test_multiple_choice import VOCAB_EN, _quarel_as_generic
from test_run_classifier import TINY_ZH, VOCAB_ZH
from test_run_classifier_real_data import long_review_data

pytestmark = pytest.mark.slow  # the scripts end to end, in subprocesses

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script(name, *flags, timeout=900):
    return script_processes.run([sys.executable, os.path.join(ROOT, name), *flags], capture_output=True, text=True,
                          timeout=timeout)


def _results(directory):
    return dict(line.split(" = ", 1) for line in (directory / "eval_results.txt").read_text().splitlines())


def _best(directory):
    return json.loads((directory / "best" / "best.json").read_text())


@pytest.fixture(scope="module")
def small_sentiment(tmp_path_factory, sentiment_dir):
    """600 training and 200 dev reviews of the real sentiment set, with the tiny Chinese config."""
    data = tmp_path_factory.mktemp("small_sentiment")
    train = (sentiment_dir / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:600]
    dev = (sentiment_dir / "dev.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:200]
    (data / "train.tsv").write_text("".join(train), encoding="utf-8")
    (data / "dev.tsv").write_text("".join(dev), encoding="utf-8")
    (data / "test.tsv").write_text("".join(dev), encoding="utf-8")  # predicted: the dev rows again
    (data / "bert_config.json").write_text(json.dumps(TINY_ZH))
    return data


def _classifier_flags(data, out):
    return ["--task_name=thucnews", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}",
            f"--bert_config_file={data / 'bert_config.json'}", f"--output_dir={out}", "--max_seq_length=48",
            "--eval_batch_size=50", "--predict_batch_size=50"]


def test_the_best_checkpoint_serves_and_a_killed_run_picks_the_same_best(tmp_path, small_sentiment):
    training = ["--do_train", "--do_eval", "--do_predict", "--train_batch_size=16", "--learning_rate=1e-3",
                "--num_train_epochs=4", "--eval_every_steps=25", "--save_checkpoints_steps=25",
                "--iterations_per_loop=5"]
    whole = tmp_path / "whole"
    result = _script("run_classifier.py", *_classifier_flags(small_sentiment, whole), *training,
                     f"--export_dir={tmp_path / 'export'}")
    assert result.returncode == 0, result.stderr[-3000:]
    best = _best(whole)
    history = [json.loads(line) for line in (whole / "eval_history.jsonl").read_text().splitlines()]
    assert [p["step"] for p in history] == [25, 50, 75, 100, 125, 150]
    assert best["step"] == max(history, key=lambda p: (p["eval_accuracy"], -p["step"]))["step"]
    values = _results(whole)
    # After training, eval and predict use the best weights (a step before the end, here).
    assert int(values["global_step"]) == best["step"]
    assert float(values["eval_accuracy"]) == pytest.approx(best["value"])
    assert f"weights: the best checkpoint {whole}/best/model.ckpt-{best['step']}" in result.stderr
    probabilities = np.loadtxt(whole / "test_results.tsv", delimiter="\t")
    texts = [line.split("\t", 1)[1].rstrip("\n") for line in
             (small_sentiment / "test.tsv").read_text(encoding="utf-8").splitlines()]
    np.testing.assert_allclose(np.array(serve(tmp_path / "export", texts)["probabilities"]), probabilities, atol=1e-5)

    # A predict-only run in a new process from the best checkpoint: the same dev metrics.
    later = tmp_path / "later"
    again = _script("run_classifier.py", *_classifier_flags(small_sentiment, later), "--do_eval",
                    f"--init_checkpoint={whole}/best")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _results(later) == values

    # SIGKILLed after a save, run again: the same best step and the same results.
    killed = tmp_path / "killed"
    command = [sys.executable, os.path.join(ROOT, "run_classifier.py"), *_classifier_flags(small_sentiment, killed),
               *training]
    assert killed_after_a_save(command, killed / "training_state", at_least=75) >= 75
    _assert_changed_flags_are_refused(command[2:], [*_classifier_flags(small_sentiment, killed), "--do_eval"],
                                      killed, tmp_path)
    resumed = _script("run_classifier.py", *command[2:])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _best(killed)["step"] == best["step"]
    assert _best(killed)["value"] == pytest.approx(best["value"])
    again_values = _results(killed)
    for key in ("eval_accuracy", "eval_loss", "global_step"):
        assert float(again_values[key]) == pytest.approx(float(values[key]), abs=1e-5), key


def _files(directory):
    """{relative path: (size, mtime)} of every file under `directory`."""
    return {str(path.relative_to(directory)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in directory.rglob("*") if path.is_file()}


def _assert_changed_flags_are_refused(flags, predicting, out, tmp_path):
    """The killed run `flags` made in `out`, run again with a flag its training state depends on
    changed (the length, the windows, another vocabulary of the same size), or `predicting` from
    it with another vocabulary: one line naming the flag and both values, nothing written."""
    with open(VOCAB_ZH, encoding="utf-8") as f:
        vocabulary = f.readlines()
    vocabulary[200], vocabulary[201] = vocabulary[201], vocabulary[200]
    other_vocabulary = tmp_path / "other_vocab.txt"
    other_vocabulary.write_text("".join(vocabulary), encoding="utf-8")
    record = out / "training_options.json"
    before = _files(out)
    again = "to go on with it, or give a new --output_dir"
    for command, message in (
            ([*flags, "--max_seq_length=40"], f"--max_seq_length=40: {out} holds a run made with "
                                              f"--max_seq_length=48 ({record}); run again with --max_seq_length=48 "
                                              + again),
            ([*flags, "--doc_stride=16", "--window_training=pooled"],
             f"--doc_stride=16: {out} holds a run made without --doc_stride ({record}); run again without "
             "--doc_stride " + again),
            ([*flags, f"--vocab_file={other_vocabulary}"],
             f"--vocab_file={other_vocabulary}: {out} holds a run made with another vocabulary"),
            ([*predicting, f"--vocab_file={other_vocabulary}"],
             f"--vocab_file={other_vocabulary}: {out} holds a run made with another vocabulary")):
        refused = _script("run_classifier.py", *command)
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert refused.stderr.strip().splitlines()[-1].startswith("error: " + message), command[-1]
        assert _files(out) == before, command[-1]


def test_multiple_choice_stops_early_on_its_best_and_resumes_to_the_same(tmp_path):
    """QuaRel's three questions learnt by heart (dev is the training file): accuracy reaches 1.0
    and stays; the first evaluation there is the best (a tie keeps the earlier step), and
    patience 4 ends the run four evaluations later. Killed and resumed: the same."""
    data = tmp_path / "data"
    data.mkdir()
    _quarel_as_generic(allennlp_fixture("quarel.jsonl"), data / "train.jsonl")
    (data / "dev.jsonl").write_text((data / "train.jsonl").read_text())
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "intermediate_size": 64,
                                  "max_position_embeddings": 128, "type_vocab_size": 2}))

    def command(out):
        return [sys.executable, os.path.join(ROOT, "run_multiple_choice.py"), "--task_name=generic",
                f"--data_dir={data}", f"--vocab_file={VOCAB_EN}", f"--bert_config_file={config}",
                f"--output_dir={out}", "--do_train", "--do_eval", "--max_seq_length=96", "--train_batch_size=3",
                "--learning_rate=3e-3", "--num_train_epochs=60", "--eval_every_steps=2",
                "--early_stopping_patience=4", "--save_checkpoints_steps=2", "--iterations_per_loop=1"]

    whole = script_processes.run(command(tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    best = _best(tmp_path / "whole")
    values = _results(tmp_path / "whole")
    assert best["metric"] == "eval_accuracy" and best["value"] == 1.0 and int(values["global_step"]) == best["step"]
    assert "early stopping at step" in whole.stderr
    stopped_at = int(whole.stderr.split("early stopping at step ")[1].split(":")[0])
    assert stopped_at == best["step"] + 4 * 2 < 60
    killed = tmp_path / "killed"
    assert killed_after_a_save(command(killed), killed / "training_state", at_least=best["step"] - 2) >= 2
    resumed = script_processes.run(command(killed), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _best(killed)["step"] == best["step"]
    assert f"early stopping at step {stopped_at}:" in resumed.stderr
    assert float(_results(killed)["eval_loss"]) == pytest.approx(float(values["eval_loss"]), abs=1e-5)


def test_a_run_made_to_stick_restarts_with_the_next_seed(tmp_path, small_sentiment):
    out = tmp_path / "out"
    result = _script("run_classifier.py", *_classifier_flags(small_sentiment, out), "--do_train", "--do_eval",
                     "--train_batch_size=16", "--learning_rate=1e-9", "--num_train_epochs=1",
                     "--on_stuck=restart", "--max_restarts=1", "--seed=7")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starting again from the initial weights with --seed=8 (restart 1 of at most 1)" in result.stderr
    assert "warning: this run looks stuck" in result.stderr  # the restarted run sticks too: said, not restarted
    values = _results(out)
    assert values["seed"] == "8" and values["restarts"] == "1"
    record = json.loads((out / "training_options.json").read_text())
    assert record["restarts"][0]["seed"] == 7
    # the restarted run's own verdict, recorded (a study marks its numbers as a stuck model's)
    assert 0 < record["stuck"]["step"] <= int(values["global_step"])
    assert record["stuck"]["reason"].startswith("the training loss has stayed within 1% of 0.6931")


def test_a_run_killed_as_its_restart_begins_goes_on_with_that_restart(tmp_path, small_sentiment):
    """--on_stuck=restart --max_restarts=2 on a run made to stick, SIGKILLed once its first restart
    is recorded (seed 8; no training state of it saved yet), then the same command again: it goes on
    with seed 8 as restart 1 and ends as the run never stopped ends (seed 9, two restarts)."""
    import signal
    import subprocess
    import time

    def command(out):
        return [sys.executable, os.path.join(ROOT, "run_classifier.py"), *_classifier_flags(small_sentiment, out),
                "--do_train", "--do_eval", "--train_batch_size=16", "--learning_rate=1e-9", "--num_train_epochs=1",
                "--on_stuck=restart", "--max_restarts=2", "--seed=7", "--save_checkpoints_steps=1000"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    uninterrupted = script_processes.run(command(whole), capture_output=True, text=True, timeout=900)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

    proc = script_processes.Popen(command(killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    record = killed / "training_options.json"
    while time.time() < deadline and not (record.exists() and json.loads(record.read_text() or "{}").get("restarts")):
        assert proc.poll() is None, "the run ended before its restart could be interrupted"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads(record.read_text())["seed"] == 8
    assert not list((killed / "training_state").glob("ckpt-*.index"))

    again = script_processes.run(command(killed), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "going on with restart 1 (--seed=8), which an earlier run of this directory began" in again.stderr
    assert "with --seed=9 (restart 2 of at most 2)" in again.stderr
    assert _results(killed) == _results(whole)
    recorded = [{k: r[k] for k in ("seed", "step")} for r in json.loads(record.read_text())["restarts"]]
    assert recorded == [{k: r[k] for k in ("seed", "step")}
                        for r in json.loads((whole / "training_options.json").read_text())["restarts"]]
    assert [r["seed"] for r in json.loads(record.read_text())["restarts"]] == [7, 8]


def test_a_saved_model_converted_from_a_windowed_run_reads_as_the_run_did(tmp_path):
    """Long documents (the review after 150 characters of news), trained with pooled windows:
    `convert_checkpoint.py --to=savedmodel` of the run's directory serves the raw texts with the
    run's windows and max pooling, equal to its test_results.tsv; and a run with
    --truncation=tail exports and converts to a model that keeps the end of each text."""
    data, config, splits = long_review_data(tmp_path, {"train": 40, "dev": 8, "test": 6})
    texts = [text for _, text in splits["test"]]
    windows = ["--doc_stride=32", "--window_training=pooled", "--window_pooling=max"]
    for name, flags in (("windows", windows), ("tail", ["--truncation=tail"])):
        out = tmp_path / name
        trained = _script("run_classifier.py", "--task_name=generic", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}",
                          f"--bert_config_file={config}", f"--output_dir={out}", "--max_seq_length=64", "--do_train",
                          "--do_predict", "--train_batch_size=8", "--num_train_epochs=1", *flags)
        assert trained.returncode == 0, trained.stderr[-3000:]
        probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
        converted = _script("convert_checkpoint.py", "--from=ours", "--to=savedmodel", f"--input={out}",
                            f"--vocab_file={VOCAB_ZH}", f"--output={tmp_path / f'{name}_serving'}")
        assert converted.returncode == 0, converted.stderr[-3000:]
        said = "windows of 64 tokens, 32 apart, max pooling" if name == "windows" else "64 tokens, tail truncation"
        assert f"serving texts as the run read them: {said}" in converted.stderr
        served = np.array(serve(tmp_path / f"{name}_serving", texts)["probabilities"])
        np.testing.assert_allclose(served, probabilities, atol=1e-5)


def test_the_pooling_chosen_on_the_dev_set_goes_with_the_best_checkpoint(tmp_path):
    """--window_pooling=auto: every evaluation reads the dev windows three ways and keeps the
    best (here by the dev loss); the best checkpoint records its reading, and eval, predict, the
    exported SavedModel, a predict-only run from OUTPUT_DIR/best in a new directory and a
    SavedModel converted from its best checkpoint all read the windows that way (a seed whose
    choice is not max: the checks would pass by chance with max, the pooling used when nothing
    was chosen)."""
    data, config, splits = long_review_data(tmp_path, {"train": 48, "dev": 24, "test": 6}, position="start")
    for split in ("train", "dev", "test"):  # labels named, so that a SavedModel naming them '0'/'1' fails
        rows = (data / f"{split}.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        (data / f"{split}.tsv").write_text(rows[0] + "".join({"0": "neg", "1": "pos"}[row[0]] + row[1:]
                                                             for row in rows[1:]), encoding="utf-8")
    texts = [text for _, text in splits["test"]]
    out = tmp_path / "out"
    common = ["--task_name=generic", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
              "--max_seq_length=64", "--doc_stride=32", "--window_training=pooled", "--window_pooling=auto"]
    trained = _script("run_classifier.py", *common, f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict",
                      "--train_batch_size=8", "--num_train_epochs=3", "--learning_rate=1e-3", "--eval_every_steps=6",
                      "--keep_best_by=loss", f"--export_dir={tmp_path / 'export'}", f"--seed={AUTO_SEED}")
    assert trained.returncode == 0, trained.stderr[-3000:]
    values, best = _results(out), _best(out)
    chosen = values["window_pooling"]
    assert chosen == best["metrics"]["window_pooling"] != "max"
    assert float(values["eval_loss"]) == float(values[f"eval_loss_by_{chosen}"])
    assert float(values["eval_loss"]) <= min(float(values[f"eval_loss_by_{p}"]) for p in ("max", "mean", "first"))
    recorded = json.loads((out / "training_options.json").read_text())["classifier_input"]
    assert recorded["window_pooling"] == chosen
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(serve(tmp_path / "export", texts)["probabilities"], probabilities, atol=1e-5)

    later = tmp_path / "later"
    predicted = _script("run_classifier.py", *common, f"--output_dir={later}", "--do_predict",
                        f"--init_checkpoint={out / 'best'}")
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    np.testing.assert_allclose(np.loadtxt(later / "test_results.tsv", delimiter="\t"), probabilities, atol=1e-6)

    # (best/ holds the weights alone: the config and the label order are found in the run's directory)
    converted = _script("convert_checkpoint.py", "--from=tf1", "--to=savedmodel", f"--input={out / 'best'}",
                        f"--vocab_file={VOCAB_ZH}", f"--output={tmp_path / 'converted'}")
    assert converted.returncode == 0, converted.stderr[-3000:]
    assert f"windows of 64 tokens, 32 apart, {chosen} pooling" in converted.stderr
    served = serve(tmp_path / "converted", texts)
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    label_list = (out / "label_list.txt").read_text().split()
    assert served["label"] == [label_list[i] for i in probabilities.argmax(1)] and set(label_list) == {"neg", "pos"}


AUTO_SEED = 2
