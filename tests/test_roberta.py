"""RoBERTa from Hugging Face: randomly initialised RoBERTa models of every class, saved by
transformers, converted with `--from=hf`, give transformers' hidden states and head outputs to
1e-5 in our models; written back with `--to=hf`, transformers loads them and gives the same
outputs again; and the same weights read as RealFormer run as a different function."""

import json
import sys

import numpy as np
import pytest
from helpers import script_processes
from helpers.conversions import convert

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config

pytestmark = pytest.mark.slow  # transformers in subprocesses

ORACLE = __file__.replace("test_roberta.py", "helpers/roberta_oracle.py")
HEADS = {"RobertaModel": "encoder", "RobertaForMaskedLM": "masked_lm", "RobertaForSequenceClassification": "classifier",
         "RobertaForTokenClassification": "tokens", "RobertaForQuestionAnswering": "span",
         "RobertaForMultipleChoice": "choice"}
LENGTH = 9


def _inputs():
    """Two sequences of 9 (the second padded with RoBERTa's padding id 1 past its 6th token)."""
    rng = np.random.default_rng(3)
    ids = rng.integers(3, 99, size=(2, LENGTH))
    mask = np.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = 1, 0
    return ids, mask


def _oracle(request):
    result = script_processes.run([sys.executable, ORACLE], input=json.dumps(request), capture_output=True, text=True,
                                  timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _model(head, config):
    return {"encoder": lambda: modeling.BertModel(config), "masked_lm": lambda: modeling.BertPretrainer(
        config, next_sentence=False), "classifier": lambda: modeling.BertClassifier(config, 3),
            "tokens": lambda: modeling.BertTokenClassifier(config, 5), "span": lambda: modeling.BertSpanLabeler(config),
            "choice": lambda: modeling.BertMultipleChoice(config)}[head]()


def _ours(head, model, ids, mask):
    inputs = {"input_ids": ids, "input_mask": mask, "token_type_ids": np.zeros_like(ids)}
    positions = np.tile(np.arange(LENGTH), (len(ids), 1))
    if head == "encoder":
        out = model(inputs)
        return {"sequence": np.asarray(out["sequence_output"]), "pooled": np.asarray(out["pooled_output"])}
    if head == "masked_lm":  # log-probabilities at every position
        return {"logits": np.asarray(model({**inputs, "masked_lm_positions": positions})["masked_lm_log_probs"])}
    if head == "tokens":
        return {"logits": np.asarray(model({**inputs, "word_positions": positions}))}
    if head == "span":
        start, end = model(inputs)
        return {"start": np.asarray(start), "end": np.asarray(end)}
    if head == "choice":
        pair = {k: np.stack([v, v[::-1]], axis=1) for k, v in inputs.items()}
        return {"logits": np.asarray(model({**pair, "choice_mask": np.ones((len(ids), 2), "int32")}))}
    return {"logits": np.asarray(model(inputs))}


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _compare(theirs, ours, mask, what):
    """Every output at 1e-5; per-position outputs where the mask keeps the position (RoBERTa
    gives a padded position the padding row's position embedding, we the next row)."""
    for name, head in HEADS.items():
        for key, value in ours[name].items():
            expected = np.array(theirs[name][key])
            if head == "masked_lm":
                expected = _log_softmax(expected)
            if expected.ndim >= 2 and expected.shape[:2] == mask.shape:
                expected, value = expected[mask == 1], value[mask == 1]
            np.testing.assert_allclose(value, expected, atol=1e-5, err_msg=f"{what}: {name} {key}")


def _load(directory, head):
    config = read_config(f"{directory}/bert_config.json")
    model = _model(head, config)
    checkpoints.load_tf1_checkpoint(model, f"{directory}/bert_model.ckpt")
    return config, model


def test_every_roberta_class_reads_and_writes_back_exactly(tmp_path):
    ids, mask = _inputs()
    inputs = {"input_ids": ids.tolist(), "attention_mask": mask.tolist()}
    theirs = _oracle({"make": str(tmp_path / "hf"), "inputs": inputs})
    ours = {}
    for name, head in HEADS.items():
        result = convert("--from=hf", "--to=tf1", f"--input={tmp_path}/hf/{name}", f"--output={tmp_path}/tf1/{name}")
        assert result.returncode == 0, (name, result.stderr[-2000:])
        config, model = _load(tmp_path / "tf1" / name, head)
        assert (config.position_offset, config.layer_norm_eps, config.type_vocab_size) == (2, 1e-5, 1)
        ours[name] = _ours(head, model, ids, mask)
        if name == "RobertaForMaskedLM":  # no pooler in that class: said, and left for a classifier to start
            assert "RobertaForMaskedLM has no pooler" in result.stderr
    _compare(theirs, ours, mask, "read from transformers")

    for name in HEADS:
        back = convert("--from=tf1", "--to=hf", f"--input={tmp_path}/tf1/{name}/bert_model.ckpt",
                       f"--output={tmp_path}/back/{name}")
        assert back.returncode == 0, (name, back.stderr[-2000:])
        written = json.loads((tmp_path / "back" / name / "config.json").read_text())
        assert (written["model_type"], written["pad_token_id"], written["layer_norm_eps"]) == ("roberta", 1, 1e-5)
    again = _oracle({"load": str(tmp_path / "back"), "inputs": inputs})
    for name in HEADS:
        assert again[name]["architectures"] == [name]
    _compare(again, ours, mask, "written back to transformers")


def test_roberta_weights_run_as_realformer(tmp_path):
    """Read as RealFormer, sum or running mean (each layer adds the previous layers' scores),
    the same weights give another function on the same inputs: far beyond float32 rounding."""
    ids, mask = _inputs()
    _oracle({"make": str(tmp_path / "hf"), "inputs": {"input_ids": ids.tolist(), "attention_mask": mask.tolist()}})
    result = convert("--from=hf", "--to=tf1", f"--input={tmp_path}/hf/RobertaModel", f"--output={tmp_path}/tf1")
    assert result.returncode == 0, result.stderr[-2000:]
    config, post_ln = _load(tmp_path / "tf1", "encoder")
    baseline = _ours("encoder", post_ln, ids, mask)["sequence"]
    for variant in ({"residual_attention": "sum"}, {"residual_attention": "mean"}):
        model = modeling.BertModel(config.replace(**variant))
        checkpoints.load_tf1_checkpoint(model, str(tmp_path / "tf1" / "bert_model.ckpt"))
        sequence = _ours("encoder", model, ids, mask)["sequence"]
        assert np.isfinite(sequence).all()
        assert np.abs(sequence - baseline)[mask == 1].max() > 1e-3, variant
    too_long = np.full((1, 39), 5)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 40 less position_offset 2"):
        post_ln({"input_ids": too_long})


def test_a_masked_lm_without_a_pooler_starts_a_classifier_and_is_not_served(tmp_path, caplog):
    """transformers builds RobertaForMaskedLM without a pooler: the TF1 checkpoint goes on
    without it, a classifier built from the Hugging Face directory itself (as --init_checkpoint
    reads it) starts its pooler fresh and says so, and a SavedModel, which would serve a random
    pooler, is refused."""
    ids, mask = _inputs()
    _oracle({"make": str(tmp_path / "hf"), "inputs": {"input_ids": ids.tolist(), "attention_mask": mask.tolist()}})
    hf = tmp_path / "hf" / "RobertaForMaskedLM"
    result = convert("--from=hf", "--to=tf1", f"--input={hf}", f"--output={tmp_path}/tf1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "bert/pooler/dense/kernel" not in checkpoints.read_tf1_checkpoint(str(tmp_path / "tf1"))
    with caplog.at_level("WARNING"):
        classifier = checkpoints.from_pretrained(str(hf), "classifier", config_file=str(hf / "config.json"),
                                                 num_labels=2)
    assert "freshly initialised (not in it): bert/pooler/dense/kernel, bert/pooler/dense/bias, output_weights, " \
           "output_bias;" in caplog.text
    assert np.asarray(classifier({"input_ids": ids, "input_mask": mask})).shape == (2, 2)
    served = convert("--from=tf1", "--to=savedmodel", f"--input={tmp_path}/tf1/bert_model.ckpt",
                     f"--output={tmp_path}/sm")
    assert served.returncode == 2 and "2 weights of this config are missing" in served.stderr, served.stderr[-2000:]
    assert not (tmp_path / "sm").exists()
