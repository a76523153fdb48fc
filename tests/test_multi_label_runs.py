"""run_classifier.py --multi_label end to end on a real multi-label set (what People's Daily
sentences mention: person, place, organization, time, number; `realdata.mentions`): a tiny
model from scratch learns it on 3 seeds, above what always answering every label scores; a
second process evaluates with thresholds tuned on the dev set, predicts and exports with them
(the record keeps the training run's, which a later conversion serves);
the SavedModel's probabilities are test_results.tsv's and its decisions those thresholds'; the
Hugging Face conversion says it is a multi-label problem."""

import json
import os
import sys

import numpy as np
import pytest
from helpers import script_processes
from helpers.in_process import completed_in_process
from helpers.serving import serve

pytestmark = pytest.mark.slow  # trains three models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
TINY = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
CONFIG = {"vocab_size": 21128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 128, "max_position_embeddings": 64, "type_vocab_size": 2}


def _results(path):
    return {k: v for k, v in (line.split(" = ", 1) for line in path.read_text().splitlines())}


def test_a_real_multi_label_set_is_learned_then_served_at_tuned_thresholds(tmp_path, real_data):
    from bert_realformer.realdata.mentions import write_mention_task
    data = tmp_path / "data"
    labels = write_mention_task(str(data))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(CONFIG))

    def run(out, *flags):  # (in a process of its own: three trainings in this one crowd its threads)
        return script_processes.run([
            sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic", "--multi_label",
            "--label_column=labels", "--text_a_column=sentence", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}",
            f"--bert_config_file={config}", f"--output_dir={out}", "--max_seq_length=48", *flags],
            capture_output=True, text=True, timeout=600)

    dev = [row.split("\t")[0] for row in (data / "dev.tsv").read_text().splitlines()[1:]]
    positives = sum(len(field.split(",")) for field in dev if field)
    every_label = 2 * positives / (len(dev) * len(labels) + positives)  # micro F1 of answering all labels
    for seed in (1, 2, 3):
        result = run(tmp_path / f"seed-{seed}", "--do_train", "--do_eval", "--train_batch_size=32",
                     "--num_train_epochs=4", "--learning_rate=2e-3", f"--seed={seed}")
        assert result.returncode == 0, result.stderr[-3000:]
        scores = _results(tmp_path / f"seed-{seed}" / "eval_results.txt")
        print(f"seed {seed}: micro F1 {float(scores['eval_micro_f1']):.4f} (every label: {every_label:.4f})")
        assert float(scores["eval_micro_f1"]) > every_label + 0.06, (seed, scores["eval_micro_f1"], every_label)
        assert json.loads(scores["thresholds"]) == dict.fromkeys(labels, 0.5)

    # another process on seed 1's run: thresholds tuned on dev (never worse for a label's F1, so
    # for their mean), then prediction and the export with them
    out = tmp_path / "seed-1"
    at_half = _results(out / "eval_results.txt")
    tuned = run(out, "--do_eval", "--do_predict", "--tune_thresholds", f"--export_dir={tmp_path / 'export'}")
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    scores = _results(out / "eval_results.txt")
    assert float(scores["eval_macro_f1"]) >= float(at_half["eval_macro_f1"])
    order = (out / "label_list.txt").read_text().split()  # (the columns of test_results.tsv)
    assert sorted(order) == sorted(labels)
    thresholds = [json.loads(scores["thresholds"])[label] for label in order]
    assert thresholds != [0.5] * len(labels)
    recorded = json.loads((out / "training_options.json").read_text())["classifier_input"]
    assert recorded["multi_label"] and recorded["thresholds"] == [0.5] * len(labels)  # (the training run's)
    probabilities = np.loadtxt(out / "test_results.tsv", ndmin=2)
    test_texts = [row.split("\t")[1] for row in (data / "test.tsv").read_text().splitlines()[1:]]
    assert probabilities.shape == (len(test_texts), len(labels))
    served = serve(tmp_path / "export", test_texts[:16])
    np.testing.assert_allclose(served["probabilities"], probabilities[:16], atol=1e-5)
    np.testing.assert_array_equal(served["predicted"],
                                  (probabilities[:16] >= np.array(thresholds)).astype(int))

    # Hugging Face: the same labels in the same order, as a multi-label problem
    from helpers.in_process import run_script
    status, stderr = run_script("convert_checkpoint.py", "--from=tf1", "--to=hf", f"--input={out}",
                                f"--output={tmp_path / 'hf'}")
    assert status == 0, stderr[-3000:]
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["problem_type"] == "multi_label_classification"
    assert [hf["id2label"][str(i)] for i in range(len(order))] == order


@pytest.mark.parametrize("flags,said", [
    (["--doc_stride=32"], "--doc_stride is not available with --multi_label"),
    (["--label_separator=;"], None),
    (["--task_name=thucnews"], "--multi_label reads users' files (--task_name=generic), not --task_name=thucnews"),
], ids=["doc-stride", "separator-is-fine", "not-generic"])
def test_multi_label_flag_mistakes_are_one_line(tmp_path, flags, said):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("text\tlabel\n你好\ta;b\n再见\t\n")
    result = completed_in_process(
        "run_classifier.py", "--task_name=generic", "--multi_label", f"--data_dir={data}",
        f"--vocab_file={TINY}/vocab.txt", f"--bert_config_file={TINY}/bert_config.json",
        f"--output_dir={tmp_path / 'out'}", "--do_eval", "--max_seq_length=32", *flags)
    if said is None:  # (reads a;b as two labels; no weights to evaluate with: that line)
        assert "no weights to evaluate or predict with" in result.stderr.strip().splitlines()[-1]
        assert (tmp_path / "out" / "label_list.txt").read_text() == "a\nb\n"
    else:
        assert result.returncode == 2 and result.stderr.strip().splitlines()[-1] == f"error: {said}" or \
            result.stderr.strip().splitlines()[-1].startswith(f"error: {said}")


def test_a_later_evaluation_uses_the_thresholds_its_training_run_tuned_and_refuses_damaged_ones(tmp_path, real_data):
    from bert_realformer.realdata.mentions import write_mention_task
    data = tmp_path / "data"
    labels = write_mention_task(str(data))
    for split, rows in (("train", 320), ("dev", 120)):  # (a few steps' worth: any weights do here)
        path = data / f"{split}.tsv"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:rows + 1]))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "out"

    def run(*flags):
        return completed_in_process(
            "run_classifier.py", "--task_name=generic", "--multi_label", "--label_column=labels",
            "--text_a_column=sentence", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}",
            f"--bert_config_file={config}", f"--output_dir={out}", "--max_seq_length=48", *flags)

    trained = run("--do_train", "--do_eval", "--tune_thresholds", "--train_batch_size=32", "--num_train_epochs=1",
                  "--learning_rate=2e-3", "--seed=1")
    assert trained.returncode == 0, trained.stderr[-3000:]
    at_training = _results(out / "eval_results.txt")
    order = (out / "label_list.txt").read_text().split()
    tuned = [json.loads(at_training["thresholds"])[label] for label in order]
    assert tuned != [0.5] * len(labels)  # (else this test could not tell the two apart)
    options = json.loads((out / "training_options.json").read_text())
    assert options["classifier_input"]["thresholds"] == tuned

    later = run("--do_eval")
    assert later.returncode == 0, later.stderr[-3000:]
    assert "thresholds: the training run's, recorded in" in later.stderr
    assert _results(out / "eval_results.txt") == at_training  # (same weights, same thresholds)

    asked = run("--do_eval", "--multi_label_threshold=0.5")
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert json.loads(_results(out / "eval_results.txt")["thresholds"]) == dict.fromkeys(labels, 0.5)

    before = (out / "eval_results.txt").read_text()
    for damaged in (["x"] * len(labels), tuned[:-1], [1.5] * len(labels)):
        options["classifier_input"]["thresholds"] = damaged
        (out / "training_options.json").write_text(json.dumps(options))
        refused = run("--do_eval", "--do_predict")
        last = refused.stderr.strip().splitlines()[-1]
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert last.startswith(f"error: {out / 'training_options.json'}: classifier_input.thresholds holds"), last
        assert f"expected {len(labels)} numbers from 0 to 1" in last and "--multi_label_threshold" in last, last
        assert (out / "eval_results.txt").read_text() == before
        assert not (out / "test_results.tsv").exists()
