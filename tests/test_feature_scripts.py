"""extract_features.py and analyze_attention.py on text: every checkpoint kind, no random
weights, the text mode of analyze_attention.py."""

import json
import os

import numpy as np
import pytest
from helpers.in_process import completed_in_process

from bert_realformer import checkpoints
from bert_realformer.checkpoints.training_states import write_training_state

pytestmark = pytest.mark.slow  # the scripts end to end

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSTLN = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
TEXT = "The cat sat on the mat ||| Dogs played in snow.\nHi\nA dog.\n"


def _run(script, *flags):
    return completed_in_process(script, *flags)  # (what the script computes: no process start-up needed)


def _extract(tmp_path, checkpoint, name):
    return _run("extract_features.py", f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/{name}",
                f"--vocab_file={POSTLN}/vocab.txt", f"--bert_config_file={POSTLN}/bert_config.json",
                f"--init_checkpoint={checkpoint}", "--layers=-1", "--max_seq_length=16")


def test_extract_features_reads_every_checkpoint_form_and_refuses_missing_weights(tmp_path):
    """The same features from the TF1 release, our training state, and the release converted to a
    Hugging Face directory named alone (its config and vocabulary taken from beside it)."""
    from bert_realformer.checkpoints import formats
    from bert_realformer.checkpoints.formats import ReadOptions, WriteOptions
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    released = _extract(tmp_path, f"{POSTLN}/bert_model.ckpt", "released.jsonl")
    assert released.returncode == 0, released.stderr[-2000:]
    assert released.stderr.strip().splitlines()[-1] == f"wrote {tmp_path}/released.jsonl (3 lines)"
    run_dir = tmp_path / "run"
    write_training_state(checkpoints.read_tf1_checkpoint(POSTLN), str(run_dir))
    ours = _extract(tmp_path, str(run_dir), "ours.jsonl")
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert f"weights: training state {run_dir}/training_state/ckpt-0" in ours.stderr
    assert (tmp_path / "ours.jsonl").read_text() == (tmp_path / "released.jsonl").read_text()
    hf_dir = tmp_path / "hf"
    formats.get("hf").write(str(hf_dir), formats.get("tf1").read(POSTLN, ReadOptions(target="hf")),
                            WriteOptions(max_seq_length=16))
    hf = _run("extract_features.py", f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/hf.jsonl",
              f"--init_checkpoint={hf_dir}", "--layers=-1", "--max_seq_length=16")
    assert hf.returncode == 0, hf.stderr[-2000:]
    assert (tmp_path / "hf.jsonl").read_text() == (tmp_path / "released.jsonl").read_text()

    values = checkpoints.read_tf1_checkpoint(POSTLN)
    del values["bert/encoder/layer_1/output/dense/kernel"]
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "partial" / "bert_model.ckpt"))
    partial = _extract(tmp_path, str(tmp_path / "partial" / "bert_model.ckpt"), "partial.jsonl")
    assert partial.returncode == 2
    assert partial.stderr.strip().splitlines()[-1].startswith("error: ")
    assert partial.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path}/partial/bert_model.ckpt lacks weights of the encoder: "
        "bert/encoder/layer_1/output/dense/kernel (another model's checkpoint?)")
    assert not (tmp_path / "partial.jsonl").exists()

    # Without a pooler (a Hugging Face masked LM's weights): features never read it.
    values = {name: value for name, value in checkpoints.read_tf1_checkpoint(POSTLN).items()
              if not name.startswith("bert/pooler/")}
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "no_pooler" / "bert_model.ckpt"))
    no_pooler = _extract(tmp_path, str(tmp_path / "no_pooler" / "bert_model.ckpt"), "no_pooler.jsonl")
    assert no_pooler.returncode == 0, no_pooler.stderr[-2000:]
    assert (tmp_path / "no_pooler.jsonl").read_text() == (tmp_path / "released.jsonl").read_text()

    (tmp_path / "empty.txt").write_text("")
    empty = _run("extract_features.py", f"--input_file={tmp_path}/empty.txt", f"--output_file={tmp_path}/e.jsonl",
                 f"--init_checkpoint={POSTLN}", "--layers=-1", "--max_seq_length=16")
    assert empty.returncode == 2
    assert empty.stderr.strip().splitlines()[-1] == (
        f"error: --input_file={tmp_path}/empty.txt is empty: expected one text (or `A ||| B` pair) per line")
    assert not (tmp_path / "e.jsonl").exists()


def test_analyze_attention_on_text_lines(tmp_path):
    """From a release's directory named alone (its config and vocabulary beside it)."""
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    result = _run("analyze_attention.py", f"--init_checkpoint={POSTLN}", f"--text_file={tmp_path}/in.txt",
                  "--max_seq_length=16", "--batch_size=2", f"--output_dir={tmp_path}/out")
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads((tmp_path / "out" / "attention_stats.json").read_text())
    config = json.load(open(f"{POSTLN}/bert_config.json"))
    assert len(stats["entropy"]) == config["num_hidden_layers"]
    assert len(stats["entropy"][0]) == config["num_attention_heads"]
    # Queries counted: the real tokens of the three lines (16 + 3 + 5 WordPieces with [CLS]/[SEP]).
    assert stats["entropy"][0][0]["count"] == 16 + 3 + 5
    assert (tmp_path / "out" / "attention_entropy.png").stat().st_size > 0


def _hand_pooled(token_features, pooling):
    """One line's vector from the original output's per-token values (its real tokens only):
    their mean, or the first token's."""
    vectors = np.array([token["layers"][0]["values"] for token in token_features])
    return vectors.mean(axis=0) if pooling == "mean" else vectors[0]


def test_sentence_embeddings_are_the_mean_or_the_cls_vector_of_the_tokens(tmp_path):
    """--pooling gives one vector per line: the mean over the line's real tokens of the last
    layer (or its [CLS] vector), as computed by hand from the per-token output; --normalize
    divides it by its norm. Several --layers are averaged first."""
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    assert _extract(tmp_path, f"{POSTLN}/bert_model.ckpt", "tokens.jsonl").returncode == 0
    tokens = [json.loads(line)["features"] for line in (tmp_path / "tokens.jsonl").read_text().splitlines()]
    common = (f"--input_file={tmp_path}/in.txt", f"--vocab_file={POSTLN}/vocab.txt",
              f"--bert_config_file={POSTLN}/bert_config.json", f"--init_checkpoint={POSTLN}/bert_model.ckpt",
              "--max_seq_length=16", "--batch_size=2")
    for pooling, normalize in (("mean", False), ("mean", True), ("cls", False)):
        name = f"{pooling}-{normalize}.jsonl"
        done = _run("extract_features.py", *common, f"--output_file={tmp_path}/{name}", f"--pooling={pooling}",
                    *(["--normalize"] if normalize else []))
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        assert [line["linex_index"] for line in lines] == [0, 1, 2]
        for line, features in zip(lines, tokens):
            expected = _hand_pooled(features, pooling)
            if normalize:
                expected = expected / np.linalg.norm(expected)
            np.testing.assert_allclose(line["embedding"], expected, atol=2e-6, err_msg=name)
    two_layers = _run("extract_features.py", *common, f"--output_file={tmp_path}/two_layers.jsonl", "--pooling=cls",
                "--layers=-1,-2")
    assert two_layers.returncode == 0, two_layers.stderr[-2000:]
    both = _run("extract_features.py", *common, f"--output_file={tmp_path}/both.jsonl", "--layers=-1,-2")
    first = json.loads((tmp_path / "both.jsonl").read_text().splitlines()[0])["features"][0]["layers"]
    np.testing.assert_allclose(json.loads((tmp_path / "two_layers.jsonl").read_text().splitlines()[0])["embedding"],
                               (np.array(first[0]["values"]) + np.array(first[1]["values"])) / 2, atol=2e-6)
    assert both.returncode == 0
    refused = _run("extract_features.py", *common, f"--output_file={tmp_path}/no.jsonl", "--normalize")
    assert refused.returncode == 2 and "--normalize is for --pooling" in refused.stderr.strip().splitlines()[-1]


def test_the_exported_encoder_embeds_text_as_its_mean_token_vector(tmp_path):
    """The encoder SavedModel's `embed` signature equals the mean of its `encode` signature's
    sequence_output over input_mask, by hand; `normalized` is that over its norm."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    from bert_realformer.checkpoints import from_pretrained
    from bert_realformer.inference.export import ServedText, export_encoder
    path = export_encoder(from_pretrained(POSTLN), ServedText(f"{POSTLN}/vocab.txt", True, 16), str(tmp_path))
    served = tf.saved_model.load(path)
    texts = tf.constant(["The cat sat on the mat", "Hi", "A dog played in the snow today"])
    embedded = served.signatures["embed"](text_a=texts)
    encoded = served.signatures["encode"](text_a=texts)
    sequence, mask = encoded["sequence_output"].numpy(), encoded["input_mask"].numpy()
    expected = (sequence * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    np.testing.assert_allclose(embedded["embedding"].numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(embedded["normalized"].numpy(), expected / np.linalg.norm(expected, axis=1,
                                                                                         keepdims=True), atol=1e-6)


def test_the_feature_scripts_read_the_real_minilm_directory_named_alone(tmp_path):
    """all-MiniLM-L6-v2 as released (a Hugging Face directory without MLM head), named by
    --init_checkpoint alone: extract_features.py's mean-pooled embeddings are transformers' own
    on the same sentences; analyze_attention.py analyses its six layers."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from helpers.minilm import minilm_dir
    source = minilm_dir()
    sentences = ["A man is playing a guitar.", "Someone plays an acoustic guitar on stage.", "Stocks fell today."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    done = _run("extract_features.py", f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/out.jsonl",
                f"--init_checkpoint={source}", "--pooling=mean", "--max_seq_length=32")
    assert done.returncode == 0, done.stderr[-2000:]
    ours = np.array([json.loads(line)["embedding"] for line in (tmp_path / "out.jsonl").read_text().splitlines()])
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    model = transformers.BertModel.from_pretrained(source).eval()
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.numpy()
    mask = batch["attention_mask"].numpy()[..., None]
    np.testing.assert_allclose(ours, (hidden * mask).sum(1) / mask.sum(1), atol=1e-4)

    analysed = _run("analyze_attention.py", f"--init_checkpoint={source}", f"--text_file={tmp_path}/in.txt",
                    "--max_seq_length=32", f"--output_dir={tmp_path}/attention")
    assert analysed.returncode == 0, analysed.stderr[-2000:]
    assert len(json.loads((tmp_path / "attention" / "attention_stats.json").read_text())["entropy"]) == 6
