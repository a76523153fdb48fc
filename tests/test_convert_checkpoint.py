"""convert_checkpoint.py: round trips between TF1, ours and Hugging Face, checked by outputs,
and real weights (all-MiniLM-L6-v2) against transformers' BertModel on PyTorch."""

import json
import os

import numpy as np
import pytest
from helpers.conversions import convert
from helpers.int8_arithmetic import missing_int8_kernel
from helpers.minilm import minilm_dir
from helpers.serving import serve

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config
from bert_realformer.inference import int8

pytestmark = pytest.mark.slow  # the scripts end to end (in subprocesses where a test is about a process)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
POSTLN = os.path.join(DATA, "bert_postln_tiny")
REALFORMER = os.path.join(DATA, "realformer_tiny")
SENTENCES = ["A man is playing a guitar.", "Someone plays an acoustic guitar on stage.",
             "The stock market fell sharply on Monday.", "Hi"]


def _batch(vocab_file, sentences, length=16):
    from tokenization import FullTokenizer
    tokenizer = FullTokenizer(vocab_file)
    ids = np.zeros((len(sentences), length), "int32")
    for row, text in enumerate(sentences):
        tokens = ["[CLS]"] + tokenizer.tokenize(text)[:length - 2] + ["[SEP]"]
        ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    return {"input_ids": ids, "input_mask": (ids > 0).astype("int32"), "token_type_ids": np.zeros_like(ids)}


def test_real_minilm_matches_transformers_on_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    source = minilm_dir()
    result = convert("--to=tf1", f"--input={source}", f"--output={tmp_path}/tf1")  # (--from: what it holds)
    assert result.returncode == 0, result.stderr[-2000:]
    config = read_config(str(tmp_path / "tf1" / "bert_config.json"))
    assert config.hidden_act == "gelu_exact" and config.num_hidden_layers == 6
    ours = modeling.BertModel(config)
    report = checkpoints.load_tf1_checkpoint(ours, str(tmp_path / "tf1"))
    assert not report.missing
    batch = _batch(os.path.join(source, "vocab.txt"), SENTENCES)  # padded rows included
    out = ours(batch)
    reference = transformers.BertModel.from_pretrained(source).eval()
    with torch.no_grad():
        ref = reference(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                        attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                        token_type_ids=torch.tensor(batch["token_type_ids"], dtype=torch.long))
    mask = batch["input_mask"][..., None].astype(bool)
    np.testing.assert_allclose(np.where(mask, out["sequence_output"], 0),
                               np.where(mask, ref.last_hidden_state.numpy(), 0), atol=1e-4)
    np.testing.assert_allclose(out["pooled_output"], ref.pooler_output.numpy(), atol=1e-4)
    # Mean-pooled sentence embeddings: the two guitar sentences are closer than guitar vs stocks.
    hidden = np.asarray(out["sequence_output"])
    embeddings = (hidden * mask).sum(1) / mask.sum(1)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    assert embeddings[0] @ embeddings[1] > embeddings[0] @ embeddings[2] + 0.2


def test_tf1_hf_tf1_round_trip_with_heads_loads_in_transformers(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    assert convert("--from=tf1", "--to=hf", f"--input={POSTLN}", f"--output={tmp_path}/hf").returncode == 0
    hf_config = json.load(open(tmp_path / "hf" / "config.json"))
    assert hf_config["architectures"] == ["BertForPreTraining"] and hf_config["hidden_act"] == "gelu_new"
    back = convert("--to=tf1", f"--input={tmp_path}/hf", f"--output={tmp_path}/tf1")  # (--from: found, hf)
    assert back.returncode == 0, back.stderr[-2000:]
    original = checkpoints.read_tf1_checkpoint(POSTLN)
    again = checkpoints.read_tf1_checkpoint(str(tmp_path / "tf1"))
    assert original.keys() == again.keys()
    for name in original:
        np.testing.assert_array_equal(again[name], original[name])
    # transformers loads the export and computes what the original BERT computed.
    io = np.load(os.path.join(POSTLN, "io.npz"))
    model = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "hf")).eval()
    with torch.no_grad():
        out = model.bert(input_ids=torch.tensor(io["input_ids"], dtype=torch.long),
                         attention_mask=torch.tensor(io["input_mask"], dtype=torch.long),
                         token_type_ids=torch.tensor(io["token_type_ids"], dtype=torch.long))
    mask = io["input_mask"][..., None].astype(bool)
    np.testing.assert_allclose(np.where(mask, out.last_hidden_state.numpy(), 0),
                               np.where(mask, io["sequence_output"], 0), atol=1e-4)


def test_realformer_to_hf_is_refused_unless_forced(tmp_path):
    result = convert("--from=tf1", "--to=hf", f"--input={REALFORMER}", f"--output={tmp_path}/hf",
                     f"--vocab_file={POSTLN}/vocab.txt")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "cannot be expressed by Hugging Face's BertModel" in last
    assert not os.path.exists(tmp_path / "hf" / "model.safetensors")
    forced = convert("--from=tf1", "--to=hf", f"--input={REALFORMER}", f"--output={tmp_path}/hf", "--force")
    assert forced.returncode == 0


def test_realformer_keeps_its_variant_through_ours_and_tf1(tmp_path):
    assert convert("--to=ours", f"--input={REALFORMER}", f"--output={tmp_path}/ours",  # (--from: found, tf1)
                   f"--vocab_file={POSTLN}/vocab.txt").returncode == 0
    result = convert("--to=tf1", f"--input={tmp_path}/ours", f"--output={tmp_path}/tf1")  # (found: ours)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "residual_attention=sum" in result.stdout
    config = read_config(str(tmp_path / "tf1" / "bert_config.json"))
    assert config.residual_attention == "sum"
    model = modeling.BertModel(config)
    checkpoints.load_tf1_checkpoint(model, str(tmp_path / "tf1"))
    io = np.load(os.path.join(REALFORMER, "io_sum.npz"))
    out = model({k: io[k] for k in ("input_ids", "input_mask", "token_type_ids")})
    np.testing.assert_allclose(out["sequence_output"], io["sequence_output"], atol=2e-5)


def test_savedmodel_export_loads_in_a_fresh_process(tmp_path):
    result = convert("--from=tf1", "--to=savedmodel", f"--input={POSTLN}", f"--output={tmp_path}/sm",
                     "--max_seq_length=16")
    assert result.returncode == 0, result.stderr[-2000:]
    texts = ["The cat sat on the mat", "Hi"]
    served = np.array(serve(tmp_path / "sm", texts, "encode", fresh_interpreter=True)["pooled_output"])
    model = modeling.BertModel(read_config(os.path.join(POSTLN, "bert_config.json")))
    checkpoints.load_tf1_checkpoint(model, POSTLN)
    expected = model(_batch(os.path.join(POSTLN, "vocab.txt"), texts))["pooled_output"]
    np.testing.assert_allclose(served, expected, atol=1e-5)


@pytest.mark.parametrize("head,said", [
    ("cls/squad", "a SQuAD span head: --to=savedmodel serves classifiers and encoders, and would drop it; "
                  "run_squad.py --do_predict predicts with it"),
    ("cls/ner", "a token-classification head: --to=savedmodel serves classifiers and encoders, and would drop "
                "it; run_ner.py --do_predict predicts with it"),
], ids=["squad", "ner"])
def test_a_checkpoint_with_a_head_no_savedmodel_serves_is_refused_not_exported_without_it(tmp_path, head, said):
    """A fine-tuned SQuAD or NER checkpoint: --to=savedmodel would have served its encoder alone
    (exit 0); one line naming the input and the head, exit 2, no output."""
    values = {k: v for k, v in checkpoints.read_tf1_checkpoint(POSTLN).items() if k.startswith("bert/")}
    hidden = values["bert/pooler/dense/bias"].shape[0]
    values[f"{head}/output_weights"] = np.zeros((2, hidden), np.float32)
    values[f"{head}/output_bias"] = np.zeros((2,), np.float32)
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "task" / "model.ckpt-9"))
    result = convert("--from=tf1", "--to=savedmodel", f"--input={tmp_path}/task/model.ckpt-9",
                     f"--bert_config_file={POSTLN}/bert_config.json", f"--vocab_file={POSTLN}/vocab.txt",
                     f"--output={tmp_path}/sm")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: --input={tmp_path}/task/model.ckpt-9 holds {said}"
    assert not (tmp_path / "sm").exists() and [p.name for p in tmp_path.iterdir()] == ["task"]


def test_regression_classifier_exports_its_score_not_a_softmax_of_one(tmp_path):
    """num_labels=1 (STS-B): the SavedModel returns the score (it returned softmax = 1.0)."""
    values = {k: v for k, v in checkpoints.read_tf1_checkpoint(POSTLN).items() if k.startswith("bert/")}
    hidden = values["bert/pooler/dense/bias"].shape[0]
    values["output_weights"] = np.random.default_rng(0).normal(0, 0.5, (1, hidden)).astype(np.float32)
    values["output_bias"] = np.array([0.25], np.float32)
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "stsb" / "bert_model.ckpt"))
    result = convert("--from=tf1", "--to=savedmodel", f"--input={tmp_path}/stsb/bert_model.ckpt",
                     f"--bert_config_file={POSTLN}/bert_config.json", f"--vocab_file={POSTLN}/vocab.txt",
                     f"--output={tmp_path}/sm", "--max_seq_length=16")
    assert result.returncode == 0, result.stderr[-2000:]
    texts = ["The cat sat on the mat", "Hi"]
    served = serve(tmp_path / "sm", texts, "classify")
    assert list(served) == ["scores"]
    model = modeling.BertModel(read_config(os.path.join(POSTLN, "bert_config.json")))
    checkpoints.load_tf1_checkpoint(model, POSTLN)
    pooled = np.asarray(model(_batch(os.path.join(POSTLN, "vocab.txt"), texts))["pooled_output"])
    expected = pooled @ values["output_weights"].T + values["output_bias"]  # the original's logits
    np.testing.assert_allclose(served["scores"], expected, atol=1e-5)
    assert not np.allclose(served["scores"], 1.0)


def test_a_classifier_converts_for_tensorflow_lite_too(tmp_path):
    """--tflite: model.tflite beside the SavedModel gives packed texts the SavedModel's
    probabilities; int8 near them; an encoder, or another format, is one line and nothing written."""
    from bert_realformer.inference.lite import lite_interpreter
    values = {k: v for k, v in checkpoints.read_tf1_checkpoint(POSTLN).items() if k.startswith("bert/")}
    hidden = values["bert/pooler/dense/bias"].shape[0]
    values["output_weights"] = np.random.default_rng(4).normal(0, 2.0, (3, hidden)).astype(np.float32)
    values["output_bias"] = np.array([0.5, -0.5, 0.0], np.float32)
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "clf" / "bert_model.ckpt"))
    common = [f"--input={tmp_path}/clf/bert_model.ckpt", f"--bert_config_file={POSTLN}/bert_config.json",
              f"--vocab_file={POSTLN}/vocab.txt", "--max_seq_length=16", "--tflite"]
    texts = ["The cat sat on the mat", "Hi", "a longer sentence about nothing much at all"]
    served = {}
    for precision, flags in (("float32", []), ("int8", ["--quantize=int8"])):
        result = convert("--from=tf1", "--to=savedmodel", *common, f"--output={tmp_path}/{precision}", *flags)
        assert result.returncode == 0, result.stderr[-2000:]
        (version,) = (tmp_path / precision).iterdir()
        assert (version / "label_list.txt").read_text() == "0\n1\n2\n"
        classify = lite_interpreter((version / "model.tflite").read_bytes()).get_signature_runner()
        served[precision] = classify(**_batch(str(version / "vocab.txt"), texts))["probabilities"]
    expected = np.array(serve(tmp_path / "float32", texts, "classify")["probabilities"])
    np.testing.assert_allclose(served["float32"], expected, atol=1e-5)
    assert 0 < np.abs(served["int8"] - expected).max() < 0.05
    for flags, line in [([f"--input={POSTLN}", "--to=savedmodel", "--tflite"],
                         "error: --tflite writes a classifier's TensorFlow Lite model; this checkpoint holds no "
                         "classifier"),
                        ([*common, "--to=hf"],
                         "error: --tflite is for --to=savedmodel; --to=hf writes no model.tflite")]:
        refused = convert("--from=tf1", *flags, f"--output={tmp_path}/refused")
        assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1] == line
        assert not (tmp_path / "refused").exists()


def test_a_fine_tuned_classifier_serves_the_labels_of_its_run(tmp_path):
    """label_list.txt beside the checkpoint (a run_classifier run's label order) names the
    SavedModel's `label` output, as run_classifier's own export does ('0', '1', ... before);
    a list that does not fit the classifier is one line and nothing written."""
    import shutil
    values = {k: v for k, v in checkpoints.read_tf1_checkpoint(POSTLN).items() if k.startswith("bert/")}
    hidden = values["bert/pooler/dense/bias"].shape[0]
    values["output_weights"] = np.random.default_rng(1).normal(0, 2.0, (3, hidden)).astype(np.float32)
    values["output_bias"] = np.array([0.5, -0.5, 0.0], np.float32)
    run = tmp_path / "run"
    checkpoints.write_tf1_checkpoint(values, str(run / "bert_model.ckpt"))
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(os.path.join(POSTLN, name), run / name)
    (run / "label_list.txt").write_text("体育\nfinance\npolitics\n", encoding="utf-8")
    result = convert("--from=tf1", "--to=savedmodel", f"--input={run}", f"--output={tmp_path}/sm",
                     "--max_seq_length=16")
    assert result.returncode == 0, result.stderr[-2000:]
    served = serve(tmp_path / "sm", SENTENCES, "classify")
    names = ["体育", "finance", "politics"]
    assert served["label"] == [names[int(np.argmax(p))] for p in served["probabilities"]]
    (run / "label_list.txt").write_text("体育\nfinance\n", encoding="utf-8")
    refused = convert("--from=tf1", "--to=savedmodel", f"--input={run}", f"--output={tmp_path}/sm2")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: label_list.txt names 2 labels but the classifier has 3 outputs")
    assert not os.path.exists(tmp_path / "sm2")


def _hf_dir(tmp_path, drop=(), add=None):
    """The tiny post-LN model as a Hugging Face directory, less `drop`, plus `add` tensors."""
    from safetensors.numpy import load_file, save_file
    assert convert("--from=tf1", "--to=hf", f"--input={POSTLN}", f"--output={tmp_path}/hf").returncode == 0
    weights = tmp_path / "hf" / "model.safetensors"
    tensors = {k: v for k, v in load_file(str(weights)).items() if k not in drop}
    save_file({**tensors, **(add or {})}, str(weights))
    return tmp_path / "hf"


def test_hf_without_its_pooler_is_refused_and_forced_conversion_lists_it(tmp_path):
    """A missing pooler used to stay random in the output without a word."""
    hf = _hf_dir(tmp_path, drop=("bert.pooler.dense.weight", "bert.pooler.dense.bias"))
    refused = convert("--from=hf", "--to=tf1", f"--input={hf}", f"--output={tmp_path}/tf1")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: --input: 2 weights of this config are missing: bert/pooler/dense/kernel, bert/pooler/dense/bias; "
        "pass --force to convert without them")
    assert not os.path.exists(tmp_path / "tf1")
    forced = convert("--from=hf", "--to=tf1", f"--input={hf}", f"--output={tmp_path}/tf1", "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert "missing from the input and so from the output: bert/pooler/dense/kernel, bert/pooler/dense/bias" \
        in forced.stderr
    assert "bert/pooler/dense/kernel" not in checkpoints.read_tf1_checkpoint(str(tmp_path / "tf1"))
    # A SavedModel would serve the random pooler: refused even with --force.
    served = convert("--from=hf", "--to=savedmodel", f"--input={hf}", f"--output={tmp_path}/sm", "--force")
    assert served.returncode == 2 and "2 weights of this config are missing" in served.stderr


def test_unknown_hf_weights_are_refused_unless_forced(tmp_path):
    hf = _hf_dir(tmp_path, add={"classifier.weight": np.ones((3, 32), np.float32)})
    refused = convert("--from=hf", "--to=tf1", f"--input={hf}", f"--output={tmp_path}/tf1")
    assert refused.returncode == 2
    assert "1 weights of --input have no BERT equivalent and would be dropped: classifier.weight" in refused.stderr
    forced = convert("--from=hf", "--to=tf1", f"--input={hf}", f"--output={tmp_path}/tf1", "--force")
    assert forced.returncode == 0 and "not converted (no BERT equivalent): classifier.weight" in forced.stderr


def test_fine_tuning_heads_and_pre_ln_norms_are_not_dropped_silently_on_the_way_to_hf(tmp_path):
    values = checkpoints.read_tf1_checkpoint(POSTLN)
    hidden = values["bert/pooler/dense/bias"].shape[0]
    values["output_weights"] = np.ones((3, hidden), np.float32)
    values["output_bias"] = np.zeros((3,), np.float32)
    classifier = tmp_path / "classifier"
    checkpoints.write_tf1_checkpoint(values, str(classifier / "bert_model.ckpt"))
    config = os.path.join(POSTLN, "bert_config.json")
    refused = convert("--from=tf1", "--to=hf", f"--input={classifier}/bert_model.ckpt",
                      f"--bert_config_file={config}", f"--output={tmp_path}/hf")
    assert refused.returncode == 2
    # A classifier that still carries the MLM/NSP heads: Hugging Face's classifier class has no
    # place for them.
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: 7 weights have no place in Hugging Face's BertForSequenceClassification and would be dropped: "
        "cls/predictions/output_bias, cls/predictions/transform/LayerNorm/beta, "
        "cls/predictions/transform/LayerNorm/gamma, cls/predictions/transform/dense/bias, "
        "cls/predictions/transform/dense/kernel, cls/seq_relationship/output_bias and 1 more; "
        "pass --force to write without them")
    assert not os.path.exists(tmp_path / "hf" / "model.safetensors")
    forced = convert("--from=tf1", "--to=hf", f"--input={classifier}/bert_model.ckpt",
                     f"--bert_config_file={config}", f"--output={tmp_path}/hf", "--force")
    assert forced.returncode == 0
    assert ("not converted (no place in BertForSequenceClassification): cls/predictions/output_bias, "
            in forced.stderr)


@pytest.mark.parametrize("flags,message", [
    (["--from=tf1", "--to=hf", "--input=/nonexistent/model.ckpt"], "--input=/nonexistent/model.ckpt: no such file"),
    (["--from=tf1", "--to=hf", f"--input={POSTLN}", f"--bert_config_file={REALFORMER}/bert_config.json"],
     "weights of this config are missing: bert/encoder/layer_"),
    (["--from=hf", "--to=tf1", f"--input={POSTLN}"], "config.json: missing"),
    (["--from=onnx", "--to=tf1", f"--input={POSTLN}"],
     "--from=onnx: unknown format; expected one of auto, hf, kerashub, ours, tf1"),
])
def test_bad_input_is_one_line(tmp_path, flags, message):
    result = convert(*flags, f"--output={tmp_path}/out")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last


def test_a_conversion_killed_between_its_files_never_leaves_new_weights_beside_an_old_config(tmp_path, monkeypatch):
    """The output is written beside --output and switched in, the config last: a conversion that
    dies before its config is in leaves a directory without one (which every reader refuses),
    not the new weights beside the old config; nothing of the staging directory stays."""
    from helpers.in_process import run_script

    from bert_realformer import storage
    out = tmp_path / "out"
    status, stderr = run_script("convert_checkpoint.py", "--from=tf1", "--to=tf1", f"--input={POSTLN}/bert_model.ckpt",
                                f"--output={out}")
    assert status == 0, stderr
    assert sorted(os.listdir(tmp_path)) == ["out"]
    realformer = json.loads((out / "bert_config.json").read_text())
    assert "residual_attention" not in realformer or realformer["residual_attention"] == "none"

    original_rename = storage.rename

    def dies_at_the_config(source, target):
        if target == f"{out}/bert_config.json":  # switching the new config in
            raise KeyboardInterrupt  # as a kill between two files
        original_rename(source, target)

    monkeypatch.setattr(storage, "rename", dies_at_the_config)
    status, stderr = run_script("convert_checkpoint.py", "--from=tf1", "--to=tf1",
                                f"--input={REALFORMER}/bert_model.ckpt", f"--output={out}")
    assert status == 130 and stderr.strip().splitlines()[-1].startswith("error: interrupted (SIGINT)")
    assert not (out / "bert_config.json").exists()  # refused by every reader, never silently wrong
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging directory left
    monkeypatch.setattr(storage, "rename", original_rename)
    refused = convert("--from=tf1", "--to=hf", f"--input={out}/bert_model.ckpt", f"--output={tmp_path}/hf")
    assert refused.returncode == 2 and "--bert_config_file is needed" in refused.stderr


@pytest.mark.parametrize("target", ["hf", "kerashub"])
@pytest.mark.parametrize("at", ["writing", "switching in"])
def test_sigint_during_a_conversion_to_hf_or_kerashub_leaves_nothing(tmp_path, monkeypatch, target, at):
    """SIGINT while the output is written (its staging directory) or switched in: one line, status
    130, no staging directory, and no --output with a part of the new files."""
    from helpers.in_process import run_script

    from bert_realformer import storage
    out = tmp_path / "out"
    original = storage.rename if at == "switching in" else storage.open_file

    def interrupted(*args, **kwargs):
        if at == "switching in" and str(args[1]).startswith(f"{out}/"):
            raise KeyboardInterrupt
        if at == "writing" and ".tmp-" in str(args[0]) and "w" in (args[1] if len(args) > 1 else "rb"):
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(storage, "rename" if at == "switching in" else "open_file", interrupted)
    status, stderr = run_script("convert_checkpoint.py", "--from=tf1", f"--to={target}",
                                f"--input={POSTLN}/bert_model.ckpt", f"--output={out}",
                                *(["--force"] if target == "kerashub" else []))  # (KerasHub has no NSP head)
    assert status == 130, stderr
    assert stderr.strip().splitlines()[-1].startswith("error: interrupted (SIGINT)")
    left = sorted(os.listdir(tmp_path))
    assert left in ([], ["out"]), left
    if left:  # the switch had begun: the config, moved in last, is not there, so every reader refuses it
        assert not (out / "config.json").exists()


def test_an_int8_savedmodel_serves_near_the_float_model(tmp_path, monkeypatch):
    """--quantize=int8 (oneDNN's int8 kernels, which run with the suite's TF_ENABLE_ONEDNN_OPTS=0
    too): the encoder's SavedModel in int8 serves outputs near the float model's; for another
    format, or in a TensorFlow without the kernels, one line."""
    result = convert("--from=tf1", "--to=savedmodel", f"--input={POSTLN}", f"--output={tmp_path}/sm8",
                     "--max_seq_length=16", "--quantize=int8")
    assert result.returncode == 0, result.stderr[-2000:]
    texts = ["The cat sat on the mat", "Hi"]
    served = np.array(serve(tmp_path / "sm8", texts, "encode", fresh_interpreter=True)["sequence_output"])
    model = modeling.BertModel(read_config(os.path.join(POSTLN, "bert_config.json")))
    checkpoints.load_tf1_checkpoint(model, POSTLN)
    expected = model(_batch(os.path.join(POSTLN, "vocab.txt"), texts))["sequence_output"].numpy()
    assert 0 < np.abs(served - expected[:, :served.shape[1]]).max() < 0.1
    for flags, line in [(["--to=hf"], "error: --quantize=int8 is for --to=savedmodel; --to=hf writes float32 weights"),
                        (["--to=savedmodel"], "error: --quantize=int8 needs TensorFlow's oneDNN int8 kernels, which "
                                              "this TensorFlow does not have (a build without oneDNN)")]:
        monkeypatch.setattr(int8, "_fused_quantized_matmul", missing_int8_kernel)
        refused = convert("--from=tf1", f"--input={POSTLN}", f"--output={tmp_path}/refused", "--quantize=int8", *flags)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1] == line
        assert not (tmp_path / "refused").exists()
