"""run_classifier.py on the data our users fine-tune on: a training file sorted by label (as
THUCNews ships) and documents longer than --max_seq_length, end to end in subprocesses. (Its
own file, so that the test processes share the suite's slow runs evenly.)"""

import json
import os

import numpy as np
import pytest
from helpers.in_process import completed_in_process
from helpers.serving import serve
from test_run_classifier import ACCURACY_THRESHOLD, TINY_ZH, VOCAB_ZH, run_classifier

pytestmark = pytest.mark.slow  # the scripts end to end (in subprocesses where a test is about a process)


def long_review_data(tmp_path, sizes, position="end"):
    """(data directory, the tiny Chinese config, the splits) of `long_review_splits` (reviews
    after 150 characters of news, or at the `position` given) in `sizes`, as generic TSV files."""
    from bert_realformer import realdata
    from bert_realformer.realdata.long_reviews import long_review_splits
    try:
        splits = long_review_splits(article_chars=150, sizes=sizes, position=position)
    except realdata.MissingDataError as error:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise
        pytest.skip(str(error))
    data = tmp_path / "data"
    data.mkdir()
    for name, rows in splits.items():
        (data / f"{name}.tsv").write_text("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows),
                                          encoding="utf-8")
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY_ZH))
    return data, config, splits


def test_long_documents_in_windows_through_eval_predict_and_the_saved_model(tmp_path):
    """--doc_stride on articles whose label sits in a review at their end: one row per document
    in test_results.tsv and one example per document in eval_results.txt; an eval-only run in a
    later process reproduces them, as do the windows at full length and run by TensorFlow Lite;
    the SavedModel takes the raw long texts and agrees."""
    data, config, splits = long_review_data(tmp_path, {"train": 40, "dev": 10, "test": 6})
    out, export = tmp_path / "out", tmp_path / "export"
    common = ["--task_name=generic", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
              f"--output_dir={out}", "--max_seq_length=64", "--doc_stride=32"]
    trained = run_classifier(*common, "--window_training=pooled", "--do_train", "--do_eval", "--do_predict",
                             "--train_batch_size=8", "--num_train_epochs=1", f"--export_dir={export}")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "(40 documents, their windows pooled (max) before the loss)" in trained.stderr  # (auto pooling)
    from bert_realformer.tasks.feature_cache import record_count
    (eval_cache,) = out.glob("eval-*.tf_record")  # (named by a digest of what it holds)
    assert record_count(str(eval_cache)) > 3 * 10  # every article is cut into several windows
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    assert np.sum(json.loads(values["confusion_matrix"])) == 10  # one example per document
    assert int(values["global_step"]) == 40 // 8  # an epoch is every document once
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (6, 2)
    first = {name: (out / name).read_text() for name in ("eval_results.txt", "test_results.tsv")}
    for name in first:
        (out / name).unlink()
    again = run_classifier(*common, "--do_eval", "--do_predict")
    assert again.returncode == 0, again.stderr[-3000:]
    assert {name: (out / name).read_text() for name in first} == first
    # Every window padded to --max_seq_length (the original's path), and the documents' windows run
    # by TensorFlow Lite: the same probabilities.
    for other_path in ("--nodynamic_padding", "--tflite_prediction"):
        other = run_classifier(*common, "--do_predict", other_path)
        assert other.returncode == 0, other.stderr[-3000:]
        assert ("XNNPACK delegate" in other.stderr) == (other_path == "--tflite_prediction")  # (the runtime's line)
        np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv", delimiter="\t"), probabilities, atol=1e-5)

    served = serve(export, [text for _, text in splits["test"]])["probabilities"]
    np.testing.assert_allclose(np.array(served), probabilities, atol=1e-5)


def test_documents_in_windows_train_every_window_by_default(tmp_path):
    """--doc_stride alone trains every window as an example with its document's label (an epoch
    is every window once), where pooled training is one example per document."""
    import re
    data, config, _ = long_review_data(tmp_path, {"train": 32, "dev": 8, "test": 4})
    out = tmp_path / "out"
    trained = run_classifier("--task_name=generic", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}",
                             f"--bert_config_file={config}", f"--output_dir={out}", "--max_seq_length=64",
                             "--doc_stride=32", "--do_train", "--do_eval", "--train_batch_size=8",
                             "--num_train_epochs=1")
    assert trained.returncode == 0, trained.stderr[-3000:]
    windows = int(re.search(r"\(32 examples, (\d+) windows\)", trained.stderr).group(1))
    assert windows > 3 * 32
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    assert int(values["global_step"]) == windows // 8


def test_a_training_file_sorted_by_label_trains_as_well_as_shuffled(tmp_path, sentiment_dir):
    """THUCNews ships grouped by category: the same 2,000 reviews, sorted by label or shuffled,
    reach the same dev accuracy within a few points (the original's 100-example buffer would
    see one class for 1,000 examples and stay at chance)."""
    lines = (sentiment_dir / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:2000]
    accuracy = {}
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY_ZH))
    for order, rows in (("sorted", sorted(lines, key=lambda line: line.split("\t")[0])), ("shuffled", lines)):
        data = tmp_path / order
        data.mkdir()
        (data / "train.tsv").write_text("".join(rows), encoding="utf-8")
        (data / "dev.tsv").write_text((sentiment_dir / "dev.tsv").read_text(encoding="utf-8"), encoding="utf-8")
        result = completed_in_process(  # (what the two runs learn, not their processes)
            "run_classifier.py", "--task_name=thucnews", f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}",
            f"--bert_config_file={config}", f"--output_dir={tmp_path}/{order}_out", "--do_train", "--do_eval",
            "--max_seq_length=48", "--train_batch_size=32", "--learning_rate=1e-3", "--num_train_epochs=3")
        assert result.returncode == 0, result.stderr[-3000:]
        values = dict(line.split(" = ", 1) for line in (tmp_path / f"{order}_out" / "eval_results.txt")
                      .read_text().splitlines())
        accuracy[order] = float(values["eval_accuracy"])
    print("dev accuracy:", accuracy)
    assert accuracy["shuffled"] > ACCURACY_THRESHOLD
    assert abs(accuracy["sorted"] - accuracy["shuffled"]) < 0.05
