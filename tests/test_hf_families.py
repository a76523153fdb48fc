"""RoBERTa, DistilBERT and ALBERT from Hugging Face: randomly initialised models of every class of
the family (ALBERT's sentence-order pretraining class too), saved by transformers, converted with
`--from=hf`, give transformers' hidden states and head outputs to 1e-5 in our models; written back
with `--to=hf`, transformers loads them and gives the same outputs again; the same weights read as
RealFormer run as a different function; a class built without a pooler starts a classifier's
pooler fresh and is never served with a random one."""

import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import allennlp_fixture
from helpers import script_processes
from helpers.conversions import convert
from helpers.serving import serve
from helpers.transformers_classifier import transformers_probabilities

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config
from bert_realformer.checkpoints.pretrained import read_pretrained
from bert_realformer.pretraining.records import feature_spec

pytestmark = pytest.mark.slow  # transformers in subprocesses

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE = os.path.join(ROOT, "tests", "helpers", "hf_family_oracle.py")
VOCAB = os.path.join(ROOT, "tests", "data", "bert_postln_tiny", "vocab.txt")  # 128 WordPiece tokens
HEADS = {"Model": "encoder", "ForMaskedLM": "masked_lm", "ForSequenceClassification": "classifier",
         "ForTokenClassification": "tokens", "ForQuestionAnswering": "span", "ForMultipleChoice": "choice"}
EXTRA_HEADS = {"albert": {"ForPreTraining": "pretraining"}}
LENGTH = 9
FUNCTION_WORDS = frozenset("the a an and or to of in on is it i you this that".split())
# family: (its classes' prefix, its padding id, what our config holds of the family's keys, what
# its config.json holds)
FAMILIES = {
    "roberta": ("Roberta", 1, {"position_offset": 2, "layer_norm_eps": 1e-5, "type_vocab_size": 1,
                               "pooler_activation": "tanh"},
                {"model_type": "roberta", "pad_token_id": 1, "layer_norm_eps": 1e-5, "hidden_size": 32}),
    "distilbert": ("DistilBert", 0, {"position_offset": 0, "type_vocab_size": 0, "pooler_activation": "relu"},
                   {"model_type": "distilbert", "dim": 32, "n_layers": 2, "hidden_dim": 37}),
    "albert": ("Albert", 0, {"embedding_size": 16, "num_hidden_groups": 2, "num_hidden_layers": 3,
                             "type_vocab_size": 2, "hidden_act": "gelu"},
               {"model_type": "albert", "embedding_size": 16, "num_hidden_groups": 2, "inner_group_num": 1,
                "hidden_act": "gelu_new"}),
}


def _inputs(pad_id):
    """Two sequences of 9 (the second padded past its 6th token)."""
    rng = np.random.default_rng(3)
    ids = rng.integers(3, 99, size=(2, LENGTH))
    mask = np.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = pad_id, 0
    return ids, mask


def _oracle(family, directory, ids, mask, action="make", vocab_size=99, as_initialised=False):
    request = {"family": family, action: str(directory), "vocab_size": vocab_size, "as_initialised": as_initialised,
               "inputs": {"input_ids": ids.tolist(), "attention_mask": mask.tolist()}}
    result = script_processes.run([sys.executable, ORACLE], input=json.dumps(request), capture_output=True, text=True,
                                  timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=list(FAMILIES))
def saved(request, tmp_path_factory):
    """(family, its directory of transformers-saved models, their outputs, the inputs): made once
    per family for every test of this module."""
    family = request.param
    directory = tmp_path_factory.mktemp(family) / "hf"
    ids, mask = _inputs(FAMILIES[family][1])
    return family, directory, _oracle(family, directory, ids, mask), ids, mask


def _model(head, config):
    return {"encoder": lambda: modeling.BertModel(config),
            "masked_lm": lambda: modeling.BertPretrainer(config, next_sentence=False),
            "pretraining": lambda: modeling.BertPretrainer(config, next_sentence=True),
            "classifier": lambda: modeling.BertClassifier(config, 3),
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
    if head == "pretraining":
        out = model({**inputs, "masked_lm_positions": positions})
        return {"logits": np.asarray(out["masked_lm_log_probs"]), "sop": np.asarray(out["next_sentence_log_probs"])}
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
    """Every output transformers gives at 1e-5; per-position outputs where the mask keeps the
    position (RoBERTa gives a padded position the padding row's position embedding, we the next)."""
    for name, outputs in theirs.items():
        for key, expected in outputs.items():
            if key == "architectures":
                continue
            expected, value = np.array(expected), ours[name][key]
            if name.endswith(("ForMaskedLM", "ForPreTraining")):
                expected = _log_softmax(expected)
            if expected.ndim >= 2 and expected.shape[:2] == mask.shape:
                expected, value = expected[mask == 1], value[mask == 1]
            np.testing.assert_allclose(value, expected, atol=1e-5, err_msg=f"{what}: {name} {key}")


def _load(directory, head):
    config = read_config(f"{directory}/bert_config.json")
    model = _model(head, config)
    checkpoints.load_tf1_checkpoint(model, f"{directory}/bert_model.ckpt")
    return config, model


def test_every_class_reads_and_writes_back_exactly(tmp_path, saved):
    family, hf, theirs, ids, mask = saved
    prefix, _, keys, written_keys = FAMILIES[family]
    heads = {**HEADS, **EXTRA_HEADS.get(family, {})}
    ours = {}
    for head_class, head in heads.items():
        name = prefix + head_class
        result = convert("--from=hf", "--to=tf1", f"--input={hf}/{name}", f"--output={tmp_path}/tf1/{name}")
        assert result.returncode == 0, (name, result.stderr[-2000:])
        config, model = _load(tmp_path / "tf1" / name, head)
        assert {key: getattr(config, key) for key in keys} == keys
        ours[name] = _ours(head, model, ids, mask)
        if head == "masked_lm":  # no pooler in that class: said, and left for a classifier to start
            assert f"{name} has no pooler" in result.stderr
    _compare(theirs, ours, mask, "read from transformers")

    for head_class in heads:
        name = prefix + head_class
        back = convert("--from=tf1", "--to=hf", f"--input={tmp_path}/tf1/{name}/bert_model.ckpt",
                       f"--output={tmp_path}/back/{name}")
        assert back.returncode == 0, (name, back.stderr[-2000:])
        written = json.loads((tmp_path / "back" / name / "config.json").read_text())
        assert {key: written.get(key) for key in written_keys} == written_keys
    again = _oracle(family, tmp_path / "back", ids, mask, action="load")
    for name, outputs in again.items():
        assert outputs["architectures"] == [name]
    _compare(again, ours, mask, "written back to transformers")


def test_the_weights_run_as_realformer(tmp_path, saved):
    """Read as RealFormer, sum or running mean (each layer adds the previous layers' scores, also
    where ALBERT's layers share weights), the same weights attend otherwise from the second layer
    on and give another function on the same inputs: far beyond float32 rounding."""
    family, hf, _, ids, mask = saved
    prefix = FAMILIES[family][0]
    result = convert("--from=hf", "--to=tf1", f"--input={hf}/{prefix}Model", f"--output={tmp_path}/tf1")
    assert result.returncode == 0, result.stderr[-2000:]
    config, post_ln = _load(tmp_path / "tf1", "encoder")
    inputs = {"input_ids": ids, "input_mask": mask}
    baseline = post_ln(inputs, output_attention_probs=True)
    for variant in ({"residual_attention": "sum"}, {"residual_attention": "mean"}):
        model = modeling.BertModel(config.replace(**variant))
        checkpoints.load_tf1_checkpoint(model, str(tmp_path / "tf1" / "bert_model.ckpt"))
        out = model(inputs, output_attention_probs=True)
        sequence = np.asarray(out["sequence_output"])
        assert np.isfinite(sequence).all()
        np.testing.assert_allclose(out["attention_probs"][0], baseline["attention_probs"][0], atol=1e-6)
        for layer in range(1, config.num_hidden_layers):
            difference = np.abs(np.asarray(out["attention_probs"][layer]) - baseline["attention_probs"][layer])
            assert difference.max() > 1e-2, (variant, layer)
        assert np.abs(sequence - baseline["sequence_output"])[mask == 1].max() > 1e-4, variant
    too_long = np.full((1, 41 - config.position_offset), 5)
    limit = "exceeds max_position_embeddings 40" + (" less position_offset 2" if config.position_offset else "")
    with pytest.raises(ValueError, match=limit):
        post_ln({"input_ids": too_long})


def test_a_masked_lm_without_a_pooler_starts_a_classifier_and_is_not_served(tmp_path, caplog, saved):
    """transformers builds the masked LM without a pooler: the TF1 checkpoint goes on without
    it, a classifier built from the Hugging Face directory itself (as --init_checkpoint reads it)
    starts its pooler fresh and says so, and a SavedModel, which would serve a random pooler, is
    refused."""
    family, directory, _, ids, mask = saved
    hf = directory / f"{FAMILIES[family][0]}ForMaskedLM"
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


def _assert_same_probabilities(theirs, ours):
    """transformers' test probabilities [N, C] are the run's, near 0 and 1 too (their logarithms);
    the run tells its examples apart (else any model of the right shape would pass)."""
    assert np.ptp(ours, axis=0).max() > 0.5, ours
    np.testing.assert_allclose(theirs, ours, atol=1e-4)
    np.testing.assert_allclose(np.log(theirs), np.log(ours), atol=1e-3)


def _made(family, directory, real_data):
    """Every class of `family` saved by transformers as it initialises them (a model that learns
    quickly) under directory/CLASS, the family's vocabulary beside each: RoBERTa's byte-level BPE
    (vocab.json, merges.txt) trained by `tokenizers` on real English lines, its special tokens
    first (`<s>` 0, `<pad>` 1, `</s>` 2, as the model's config has them); ALBERT's SentencePiece
    model of 5,000 pieces trained on them (its special pieces and ids); DistilBERT's WordPiece
    vocab.txt (128 tokens). Returns the vocabulary's file name."""
    if family == "roberta":
        tokenizers = pytest.importorskip("tokenizers")
        bpe = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
        bpe.train_from_iterator(real_data.english_sentences()[:6000], vocab_size=2000, min_frequency=2,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
        bpe.save_model(str(directory))
        files, vocab_size = ("vocab.json", "merges.txt"), len(json.loads((directory / "vocab.json").read_text()))
    elif family == "albert":
        spm = pytest.importorskip("sentencepiece")
        with open(directory / "spiece.model", "wb") as model:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(line.lower() for line in real_data.english_sentences()[:6000]),
                model_writer=model, vocab_size=5000, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2)
        files, vocab_size = ("spiece.model",), 5000
    else:
        (directory / "vocab.txt").write_bytes(open(VOCAB, "rb").read())
        files, vocab_size = ("vocab.txt",), 128
    ids, mask = _inputs(FAMILIES[family][1])
    _oracle(family, directory, ids, mask, vocab_size=vocab_size, as_initialised=True)
    for saved_class in directory.iterdir():
        if saved_class.is_dir():
            for name in files:
                (saved_class / name).write_bytes((directory / name).read_bytes())
    return files[0]


@pytest.fixture(scope="module")
def releases(tmp_path_factory, real_data):
    """`releases(family, head="ForMaskedLM")` -> (the directory of the family's class of `head`,
    its vocabulary file), made once per family for the module (`_made`); a test reads it only."""
    made = {}

    def of(family, head="ForMaskedLM"):
        if family not in made:
            directory = tmp_path_factory.mktemp(f"{family}-release")
            made[family] = (directory, _made(family, directory, real_data))
        directory, vocab = made[family]
        return directory / f"{FAMILIES[family][0]}{head}", directory / f"{FAMILIES[family][0]}{head}" / vocab
    return of


def test_each_family_keeps_its_tokenizer_files_through_tf1(tmp_path, releases):
    """Through TF1 each family keeps its tokenizer's files (SentencePiece's model, BPE's
    vocabulary and merges), read back as its own and written back to Hugging Face as they were."""
    for family, files in (("albert", ["spiece.model"]), ("roberta", ["merges.txt", "vocab.json"])):
        release, _ = releases(family)
        tf1 = tmp_path / f"{family}-tf1"
        result = convert("--to=tf1", f"--input={release}", f"--output={tf1}")
        assert result.returncode == 0, result.stderr[-2000:]
        assert sorted(p.name for p in tf1.iterdir()) == sorted(
            ["bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "checkpoint", *files])
        assert read_pretrained(str(tf1)).vocab_file == str(tf1 / files[-1])
        back = tmp_path / f"{family}-back"
        assert convert("--to=hf", f"--input={tf1}", f"--output={back}").returncode == 0
        for name in files:
            assert (back / name).read_bytes() == (release / name).read_bytes()


def test_a_conversion_replaces_an_earlier_one(tmp_path, releases):
    """A BERT conversion, then ALBERT's into the same --output: nothing of the first survives
    (no vocab.txt or tokenizer.json beside spiece.model to be taken for its tokenizer), files of
    the user's stay. Without a vocabulary the conversion says it wrote no tokenizer; an --output
    that holds the --input is refused."""
    out = tmp_path / "out"
    first = convert("--to=hf", f"--input={os.path.dirname(VOCAB)}", f"--output={out}")
    assert first.returncode == 0, first.stderr[-2000:]
    assert (out / "tokenizer.json").exists() and (out / "vocab.txt").exists()
    (out / "notes.txt").write_text("mine")
    albert, _ = releases("albert")
    second = convert("--to=hf", f"--input={albert}", f"--output={out}")
    assert second.returncode == 0, second.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "notes.txt", "spiece.model"]
    assert read_pretrained(str(out)).vocab_file == str(out / "spiece.model")

    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json"):
        (bare / name).write_bytes(open(os.path.join(os.path.dirname(VOCAB), name), "rb").read())
    result = convert("--to=hf", f"--input={bare}/bert_model.ckpt", f"--output={tmp_path / 'bare-hf'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (f"note: no vocabulary given or found beside --input={bare}/bert_model.ckpt: {tmp_path / 'bare-hf'} has "
            "no tokenizer files (give --vocab_file to write them)") in result.stderr
    inside = convert("--to=tf1", f"--input={bare}/bert_model.ckpt", f"--output={bare}")
    assert inside.returncode == 2
    assert inside.stderr.strip().splitlines()[-1] == (
        f"error: --output={bare} holds --input={bare}/bert_model.ckpt: a conversion replaces what is there; write "
        "it to another directory")


def test_the_feature_scripts_read_each_familys_masked_lm_named_alone(tmp_path, releases, real_data):
    """extract_features.py and analyze_attention.py on each family's masked LM (no pooler, which
    neither reads), tokenized by its own vocabulary's kind (WordPiece, SentencePiece, BPE)."""
    from helpers.in_process import completed_in_process
    lines = real_data.english_sentences()[:3]
    (tmp_path / "in.txt").write_text("".join(f"{line}\n" for line in lines))
    for family in FAMILIES:
        release, _ = releases(family)
        features = completed_in_process("extract_features.py", f"--init_checkpoint={release}", "--pooling=mean",
                                        f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/{family}.jsonl",
                                        "--max_seq_length=16", "--do_lower_case=false", "--layers=-1")
        assert features.returncode == 0, (family, features.stderr[-2000:])
        vectors = [json.loads(line)["embedding"] for line in (tmp_path / f"{family}.jsonl").read_text().splitlines()]
        assert len(vectors) == 3 and all(np.isfinite(v).all() for v in vectors), family
        attention = completed_in_process("analyze_attention.py", f"--init_checkpoint={release}",
                                         f"--text_file={tmp_path}/in.txt", "--max_seq_length=16",
                                         "--do_lower_case=false", f"--output_dir={tmp_path}/{family}-attention")
        assert attention.returncode == 0, (family, attention.stderr[-2000:])


def _fine_tune(tmp_path, release, vocab_file, rows, variant, max_seq_length=16, *extra_flags):
    """run_classifier.py from the Hugging Face directory `release` on `rows` ({split: [(text,
    label)] or [(text, second text, label)]}) as `variant` (`--residual_attention`), 30 epochs at
    2e-3 (long enough to tell its examples apart): (its output directory, the finished process)."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    pairs = len(next(iter(rows.values()))[0]) == 3
    for split, part in rows.items():
        header = "text\tsecond\tlabel\n" if pairs else "text\tlabel\n"
        (data / f"{split}.tsv").write_text(header + "".join("\t".join(row) + "\n" for row in part))
    out = tmp_path / f"run_{variant}"
    trained = script_processes.run(
        [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic", f"--data_dir={data}",
         *(["--text_b_column=second"] if pairs else []),
         f"--vocab_file={vocab_file}", f"--bert_config_file={release}/config.json", f"--init_checkpoint={release}",
         f"--residual_attention={variant}", f"--max_seq_length={max_seq_length}", "--train_batch_size=8",
         "--num_train_epochs=30", "--learning_rate=2e-3", f"--output_dir={out}", "--do_train", "--do_predict",
         *extra_flags],
        capture_output=True, text=True, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    return out, trained


def _fine_tune_both_and_convert(tmp_path, release, vocab_file, rows, recorded, max_seq_length=16, export=False):
    """`_fine_tune` as post-LN (`none`) and as RealFormer (`sum`; with `export`, its SavedModel in
    tmp_path/export), each run's bert_config.json holding `recorded` ({key: value}) and its
    variant; the post-LN run converted back to Hugging Face (tmp_path/back) with `vocab_file`.
    Returns {variant: the finished process}."""
    finished = {}
    for variant in ("none", "sum"):
        flags = [f"--export_dir={tmp_path}/export"] if export and variant == "sum" else []
        out, finished[variant] = _fine_tune(tmp_path, release, vocab_file, rows, variant, max_seq_length, *flags)
        config = json.loads((out / "bert_config.json").read_text())
        assert {key: config[key] for key in recorded} == recorded and config["residual_attention"] == variant
    result = convert("--from=ours", "--to=hf", f"--input={tmp_path}/run_none", f"--vocab_file={vocab_file}",
                     f"--output={tmp_path}/back")
    assert result.returncode == 0, result.stderr[-3000:]
    return finished


def test_distilbert_fine_tunes_as_post_ln_and_realformer_and_leaves_for_transformers(tmp_path, releases):
    """The journey from a DistilBERT directory (WordPiece, as DistilBERT's releases are):
    run_classifier.py fine-tunes from it as it is (--init_checkpoint=DIR, its config.json) as
    post-LN and as RealFormer; the post-LN run, converted back, is a DistilBertForSequenceClassification
    that, tokenizing the raw test texts itself, gives the run's test_results.tsv."""
    release, _ = releases("distilbert")
    rng = random.Random(0)
    words = "the cat sat on a mat dog played in snow old man reads it rained".split()
    labels = ["negative", "neutral", "positive"]
    rows = {split: [(" ".join(rng.choices(words, k=rng.randint(3, 12))), labels[i % 3]) for i in range(n)]
            for split, n in (("train", 64), ("test", 9))}
    finished = _fine_tune_both_and_convert(tmp_path, release, VOCAB, rows,
                                           {"type_vocab_size": 0, "pooler_activation": "relu"})
    for variant, trained in finished.items():
        assert "freshly initialised (not in it): bert/pooler/dense/kernel, bert/pooler/dense/bias" in trained.stderr
        probabilities = np.loadtxt(tmp_path / f"run_{variant}" / "test_results.tsv", delimiter="\t")
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    probabilities, _, model_class = transformers_probabilities(tmp_path / "back", [t for t, _ in rows["test"]], 16)
    assert model_class == "DistilBertForSequenceClassification"
    _assert_same_probabilities(probabilities, np.loadtxt(tmp_path / "run_none" / "test_results.tsv", delimiter="\t"))


def test_roberta_fine_tunes_sentence_pairs_as_post_ln_and_realformer_from_its_bpe_directory(tmp_path, real_data,
                                                                                             releases):
    """The journey from a RoBERTa directory (vocab.json and merges.txt beside its weights):
    run_classifier.py fine-tunes on sentence pairs from it as it is, --vocab_file naming
    vocab.json, as post-LN and as RealFormer; each pair is RoBERTa's `<s> A </s></s> B </s>` with
    one token type. The post-LN run, converted back with its vocabulary, is a
    RobertaForSequenceClassification that, tokenizing the raw pairs itself, gives the run's test
    probabilities."""
    from tokenization.vocabularies import tokenizer_for
    release, vocab = releases("roberta")
    tokenizer = tokenizer_for(str(vocab))
    splits = real_data.english_sentiment_splits()
    short = {split: [text for text, _ in part if len(tokenizer.tokenize(text)) <= 16] for split, part in splits.items()}
    # (the first text's sentiment; short enough that no pair is cut, so no truncation rule is compared)
    labels = {text: label for part in splits.values() for text, label in part}
    rows = {split: [(a, b, labels[a]) for a, b in zip(short[split][:n], short[split][n:2 * n], strict=True)]
            for split, n in (("train", 64), ("test", 9))}
    _fine_tune_both_and_convert(tmp_path, release, vocab, rows, {"position_offset": 2, "type_vocab_size": 1},
                                max_seq_length=38)
    assert (tmp_path / "back" / "merges.txt").read_bytes() == (release / "merges.txt").read_bytes()
    pairs = [(a, b) for a, b, _ in rows["test"]]
    probabilities, _, model_class = transformers_probabilities(tmp_path / "back", pairs, 38)
    assert model_class == "RobertaForSequenceClassification"
    ours = np.loadtxt(tmp_path / "run_none" / "test_results.tsv", delimiter="\t")
    _assert_same_probabilities(probabilities, ours)


def _tag_words(tmp_path, real_data, release, vocab_file):
    """run_ner.py from the directory `release` (a generic task: real English sentences, their
    function words tagged) as post-LN and RealFormer, the post-LN run converted back to Hugging
    Face (tmp_path/back). Returns (the test sentences: word lists, each fitting one window, the
    run's labels in its order, the post-LN run's predicted tag of every test word)."""
    from tokenization.vocabularies import tokenizer_for
    tokenizer = tokenizer_for(str(vocab_file))
    # (sentences that fit one window, so that transformers sees each whole as the run does)
    sentences = [words for words in (line.split() for line in real_data.english_sentences()[6000:6400])
                 if 4 <= len(words) and sum(len(tokenizer.tokenize_word(w)) for w in words) <= 36]
    data = tmp_path / "conll"
    data.mkdir()
    for split, part in (("train", sentences[:40]), ("dev", sentences[40:50]), ("test", sentences[50:70])):
        (data / f"{split}.txt").write_text("".join(
            "".join(f"{w}\t{'B-FUNC' if w.lower() in FUNCTION_WORDS else 'O'}\n" if split != "test" else f"{w}\n"
                    for w in words) + "\n" for words in part))
    for variant in ("none", "sum"):
        tagged = script_processes.run(
            [sys.executable, os.path.join(ROOT, "run_ner.py"), "--task_name=generic", f"--data_dir={data}",
             f"--vocab_file={vocab_file}", f"--bert_config_file={release}/config.json",
             f"--init_checkpoint={release}", f"--residual_attention={variant}", "--max_seq_length=38",
             "--train_batch_size=8", "--num_train_epochs=30", "--learning_rate=2e-3",
             f"--output_dir={tmp_path}/ner_{variant}", "--do_train", "--do_predict"],
            capture_output=True, text=True, timeout=900)
        assert tagged.returncode == 0, tagged.stderr[-3000:]
    labels = next(line for line in tagged.stderr.splitlines() if "labels: " in line).split("labels: ")[1].split()
    result = convert("--from=ours", "--to=hf", f"--input={tmp_path}/ner_none", f"--vocab_file={vocab_file}",
                     f"--output={tmp_path}/back")
    assert result.returncode == 0, result.stderr[-3000:]
    ours = [line.split()[-1] for line in (tmp_path / "ner_none" / "test_predictions.txt").read_text().splitlines()
            if line]
    test = sentences[50:70]
    assert len(ours) == sum(map(len, test)) and set(ours) == {"O", "B-FUNC"}  # (both tags predicted)
    return test, labels, ours


def test_roberta_tags_words_each_with_the_space_before_it_as_transformers_does(tmp_path, real_data, releases):
    """run_ner.py from the RoBERTa directory as post-LN and RealFormer; the post-LN run, converted
    back, is a RobertaForTokenClassification that, tokenizing the words itself (one by one, the
    space before each: add_prefix_space), gives each word's first token the run's predicted tag."""
    release, vocab = releases("roberta")
    sentences, labels, ours = _tag_words(tmp_path, real_data, release, vocab)
    code = ("import json, sys, torch, transformers\n"
            "t = transformers.AutoTokenizer.from_pretrained(sys.argv[1], add_prefix_space=True)\n"
            "m = transformers.AutoModelForTokenClassification.from_pretrained(sys.argv[1]).eval()\n"
            "tags = []\n"
            "for words in json.loads(sys.stdin.read()):\n"
            "    x = t(words, is_split_into_words=True, return_tensors='pt')\n"
            "    with torch.no_grad():\n"
            "        best = m(**x).logits[0].argmax(-1).tolist()\n"
            "    firsts = [x.word_ids().index(w) for w in range(len(words))]\n"
            "    tags += [best[i] for i in firsts]\n"
            "print(json.dumps({'tags': tags, 'class': type(m).__name__}))\n")
    served = script_processes.run([sys.executable, "-c", code, str(tmp_path / "back")],
                                  input=json.dumps(sentences), capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    theirs = json.loads(served.stdout.strip().splitlines()[-1])
    assert theirs["class"] == "RobertaForTokenClassification"
    assert [labels[i] for i in theirs["tags"]] == ours


def test_albert_tags_words_from_its_sentencepiece_directory(tmp_path, real_data, releases):
    """run_ner.py from the ALBERT directory (each word's pieces from spiece.model, `▁` first) as
    post-LN and RealFormer; the post-LN run, converted back, is an AlbertForTokenClassification
    that, on the run's own token ids (transformers' ALBERT tokenizer is not SentencePiece's),
    gives each word's first piece the run's predicted tag."""
    from bert_realformer.tasks.ner.features import sentence_windows
    from bert_realformer.tasks.ner.reading import Sentence
    from tokenization.vocabularies import tokenizer_for
    release, spiece = releases("albert")
    sentences, labels, ours = _tag_words(tmp_path, real_data, release, spiece)
    arrays, windows = sentence_windows([Sentence(tokens=words, tags=None, lines=[], path="") for words in sentences],
                                       tokenizer_for(str(spiece)), 38)
    assert len(windows) == len(sentences)
    code = ("import json, sys, torch, transformers\n"
            "m = transformers.AlbertForTokenClassification.from_pretrained(sys.argv[1]).eval()\n"
            "r = {k: torch.tensor(v) for k, v in json.loads(sys.stdin.read()).items()}\n"
            "with torch.no_grad():\n"
            "    logits = m(input_ids=r['input_ids'], attention_mask=r['input_mask']).logits\n"
            "best = logits.gather(1, r['word_positions'][:, :, None].expand(-1, -1, logits.shape[-1])).argmax(-1)\n"
            "print(json.dumps({'tags': [row[:int(n)] for row, n in zip(best.tolist(), r['word_mask'].sum(1))]}))\n")
    request = {key: arrays[key].tolist() for key in ("input_ids", "input_mask", "word_positions", "word_mask")}
    served = script_processes.run([sys.executable, "-c", code, str(tmp_path / "back")], input=json.dumps(request),
                                  capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    theirs = json.loads(served.stdout.strip().splitlines()[-1])["tags"]
    assert [labels[i] for row in theirs for i in row] == ours


def test_albert_fine_tunes_as_post_ln_and_realformer_from_its_sentencepiece_directory(tmp_path, real_data,
                                                                                       releases):
    """The journey from an ALBERT directory (spiece.model beside its weights): run_classifier.py
    fine-tunes from it as it is, --vocab_file naming the SentencePiece model, as post-LN and as
    RealFormer (the residual attention carried across the shared layers); the post-LN run,
    converted back with its spiece.model, is an AlbertForSequenceClassification that gives
    transformers the run's test probabilities on the run's own token ids; the RealFormer run's
    SavedModel, tokenizing in the graph (SentencePiece's op), gives them on the raw texts in a
    Python where only TensorFlow and tensorflow_text are imported."""
    from tokenization.vocabularies import tokenizer_for
    release, spiece = releases("albert")
    splits = real_data.english_sentiment_splits()
    rows = {"train": splits["train"][:64], "test": splits["test"][:9]}
    _fine_tune_both_and_convert(tmp_path, release, spiece, rows, {"embedding_size": 16, "num_hidden_groups": 2},
                                export=True)
    assert (tmp_path / "back" / "spiece.model").read_bytes() == spiece.read_bytes()
    tokenizer = tokenizer_for(str(spiece))
    ids = np.zeros((len(rows["test"]), 16), "int64")
    for row, (text, _) in enumerate(rows["test"]):
        tokens = [tokenizer.cls_token, *tokenizer.tokenize(text)[:14], tokenizer.sep_token]
        ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    theirs = _oracle_probabilities(tmp_path / "back", ids)
    assert theirs["class"] == "AlbertForSequenceClassification" and len(theirs["p"][0]) == 2
    _assert_same_probabilities(np.array(theirs["p"]),
                               np.loadtxt(tmp_path / "run_none" / "test_results.tsv", delimiter="\t"))
    served = serve(tmp_path / "export", [text for text, _ in rows["test"]], fresh_interpreter=True)
    np.testing.assert_allclose(np.array(served["probabilities"]),
                               np.loadtxt(tmp_path / "run_sum" / "test_results.tsv", delimiter="\t"), atol=1e-5)


def _oracle_probabilities(directory, ids, token_types=None, auto_class="AutoModelForSequenceClassification"):
    """transformers' `auto_class` of `directory` on token ids [N, S] (0: padding), or [N, C, S]
    for multiple choice, with `token_types` of that shape (None: all 0): its softmax."""
    code = ("import json, sys, torch, transformers\n"
            "m = getattr(transformers, sys.argv[2]).from_pretrained(sys.argv[1]).eval()\n"
            "ids, types = (torch.tensor(x) for x in json.loads(sys.stdin.read()))\n"
            "with torch.no_grad():\n"
            "    logits = m(input_ids=ids, attention_mask=(ids != 0).long(), token_type_ids=types).logits\n"
            "print(json.dumps({'p': torch.softmax(logits, -1).numpy().tolist(), 'class': type(m).__name__}))\n")
    types = np.zeros_like(ids) if token_types is None else token_types
    served = script_processes.run([sys.executable, "-c", code, str(directory), auto_class],
                                  input=json.dumps([ids.tolist(), types.tolist()]),
                                  capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    return json.loads(served.stdout.strip().splitlines()[-1])


def test_albert_answers_multiple_choice_questions_as_post_ln_and_realformer_from_its_directory(tmp_path, releases):
    """run_multiple_choice.py from an ALBERT directory (its spiece.model as --vocab_file) on
    QuaRel's questions, as post-LN and as RealFormer: each learns them; the post-LN run, converted
    back, is an AlbertForMultipleChoice that gives transformers the run's test probabilities on
    `[CLS] question [SEP] choice [SEP]` of the SentencePiece tokens (the choice of token type 1)."""
    from test_multiple_choice import _quarel_as_generic

    from tokenization.vocabularies import tokenizer_for
    release, spiece = releases("albert")
    data = tmp_path / "data"
    data.mkdir()
    rows = _quarel_as_generic(allennlp_fixture("quarel.jsonl"), data / "train.jsonl")
    for split in ("dev", "test"):
        (data / f"{split}.jsonl").write_text((data / "train.jsonl").read_text())
    length = 40  # (the release's max_position_embeddings: the questions are cut)
    for variant in ("none", "sum"):
        trained = script_processes.run(
            [sys.executable, os.path.join(ROOT, "run_multiple_choice.py"), "--task_name=generic", f"--data_dir={data}",
             f"--vocab_file={spiece}", f"--bert_config_file={release}/config.json", f"--init_checkpoint={release}",
             f"--residual_attention={variant}", f"--max_seq_length={length}", "--train_batch_size=3",
             "--num_train_epochs=60", "--learning_rate=5e-3", f"--output_dir={tmp_path}/run_{variant}", "--do_train",
             "--do_eval", "--do_predict"], capture_output=True, text=True, timeout=900)
        assert trained.returncode == 0, trained.stderr[-3000:]
        results = dict(line.split(" = ", 1) for line in (tmp_path / f"run_{variant}" / "eval_results.txt")
                       .read_text().splitlines())
        assert float(results["eval_accuracy"]) == 1.0, (variant, results)
    result = convert("--from=ours", "--to=hf", f"--input={tmp_path}/run_none", f"--vocab_file={spiece}",
                     f"--output={tmp_path}/back")
    assert result.returncode == 0, result.stderr[-3000:]
    tokenizer = tokenizer_for(str(spiece))
    ids, types = (np.zeros((len(rows), 2, length), "int64") for _ in range(2))
    for n, row in enumerate(rows):
        for c, choice in enumerate(row["choices"]):
            question, answer = tokenizer.tokenize(row["context"]), tokenizer.tokenize(choice)
            while len(question) + len(answer) > length - 3:  # the longer one loses its last token
                (question if len(question) > len(answer) else answer).pop()
            first = [tokenizer.cls_token, *question, tokenizer.sep_token]
            tokens = [*first, *answer, tokenizer.sep_token]
            ids[n, c, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
            types[n, c, len(first):len(tokens)] = 1
    theirs = _oracle_probabilities(tmp_path / "back", ids, types, auto_class="AlbertForMultipleChoice")
    assert theirs["class"] == "AlbertForMultipleChoice"
    ours = {variant: np.loadtxt(tmp_path / f"run_{variant}" / "test_results.tsv", delimiter="\t")
            for variant in ("none", "sum")}
    _assert_same_probabilities(np.array(theirs["p"]), ours["none"])
    assert np.abs(np.log(ours["sum"]) - np.log(ours["none"])).max() > 1e-2  # (another function, another run)


def _continue_pretraining(tmp_path, real_data, release, vocab_file, data_flag):
    """create_pretraining_data.py (`data_flag`: --sentence_order or --no_nsp) from real English
    documents of 6 sentences with `vocab_file`, then run_pretraining.py from the directory
    `release` (named by its transformers class) as post-LN and RealFormer for 20 steps, evaluated
    before them and after on 16 of the records. Returns ({variant: eval history}, transformers'
    losses of `release` on those 16 records: {mlm, and for a pretraining class sop,
    sop_accuracy}, the 16 records)."""
    sentences = real_data.english_sentences()[7000:7240]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(line + ("\n\n" if i % 6 == 5 else "\n") for i, line in enumerate(sentences)))
    shape = ["--max_seq_length=32", "--max_predictions_per_seq=5"]
    made = script_processes.run(
        [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"), f"--input_file={corpus}",
         f"--output_file={tmp_path}/pairs.tfrecord", f"--vocab_file={vocab_file}", data_flag, "--dupe_factor=1",
         *shape], capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    no_nsp = ["--no_nsp"] if data_flag == "--no_nsp" else []
    histories = {}
    for variant in ("none", "sum"):
        out = tmp_path / f"pretrain_{variant}"
        trained = script_processes.run(
            [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={release}/config.json",
             f"--init_checkpoint={release}", f"--input_file={tmp_path}/pairs.tfrecord",
             f"--eval_input_file={tmp_path}/pairs.tfrecord", f"--output_dir={out}", f"--residual_attention={variant}",
             "--do_train", *no_nsp, *shape, "--train_batch_size=8", "--num_train_steps=20", "--num_warmup_steps=0",
             "--learning_rate=1e-3", "--eval_every_steps=20", "--max_eval_steps=2", "--eval_batch_size=8"],
            capture_output=True, text=True, timeout=900)
        assert trained.returncode == 0, trained.stderr[-3000:]
        histories[variant] = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    spec = {key: value for key, value in feature_spec(32, 5).items() if not (no_nsp and key == "next_sentence_labels")}
    records = [{key: value.numpy().tolist() for key, value in example.items()} for example in
               tf.data.TFRecordDataset(str(tmp_path / "pairs.tfrecord")).take(16).map(
                   lambda record: tf.io.parse_single_example(record, spec))]
    code = ("import inspect, json, sys, torch, transformers\n"
            "head = 'ForMaskedLM' if sys.argv[2].endswith('ForMaskedLM') else 'ForPreTraining'\n"
            "m = getattr(transformers, sys.argv[2]).from_pretrained(sys.argv[1]).eval()\n"
            "r = {k: torch.tensor(v) for k, v in json.loads(sys.stdin.read()).items()}\n"
            "takes_types = 'token_type_ids' in inspect.signature(m.forward).parameters  # (DistilBERT's not)\n"
            "types = {'token_type_ids': r['segment_ids']} if takes_types else {}\n"
            "with torch.no_grad():\n"
            "    out = m(input_ids=r['input_ids'], attention_mask=r['input_mask'], **types)\n"
            "logits = out.logits if head == 'ForMaskedLM' else out.prediction_logits\n"
            "logp = torch.log_softmax(logits, -1)\n"
            "at = torch.gather(logp, 1, r['masked_lm_positions'][:, :, None].expand(-1, -1, logp.shape[-1]))\n"
            "nll = -torch.gather(at, 2, r['masked_lm_ids'][:, :, None])[:, :, 0]\n"
            "w = r['masked_lm_weights']\n"
            "result = {'mlm': float((nll * w).sum() / w.sum())}\n"
            "if head == 'ForPreTraining':\n"
            "    sop, labels = torch.log_softmax(out.sop_logits, -1), r['next_sentence_labels'][:, 0]\n"
            "    result.update(sop=float(-sop.gather(1, labels[:, None]).mean()),\n"
            "                  sop_accuracy=float((sop.argmax(-1) == labels).float().mean()))\n"
            "print(json.dumps(result))\n")
    batch = {key: [record[key] for record in records] for key in records[0]}
    served = script_processes.run([sys.executable, "-c", code, str(release), release.name],
                                  input=json.dumps(batch), capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    for history in histories.values():
        assert [point["step"] for point in history] == [0, 20]
        assert history[1]["masked_lm_loss"] < history[0]["masked_lm_loss"]
    return histories, json.loads(served.stdout.strip().splitlines()[-1]), records


def test_albert_continues_pretraining_on_sentence_order_pairs_from_its_directory(tmp_path, real_data, releases):
    """create_pretraining_data.py with ALBERT's spiece.model and --sentence_order, then
    run_pretraining.py from the ALBERT directory as it is, as post-LN and as RealFormer: the
    post-LN run's evaluation before its first step is transformers' AlbertForPreTraining on the
    same records (masked-LM loss and sentence-order loss and accuracy), and both runs train."""
    release, spiece = releases("albert", "ForPreTraining")
    histories, theirs, records = _continue_pretraining(tmp_path, real_data, release, spiece, "--sentence_order")
    ours = histories["none"][0]
    assert 0 < sum(record["next_sentence_labels"][0] for record in records) < 16  # (both orders among them)
    assert ours["masked_lm_loss"] == pytest.approx(theirs["mlm"], abs=1e-4)
    assert ours["next_sentence_loss"] == pytest.approx(theirs["sop"], abs=1e-4)
    assert ours["next_sentence_accuracy"] == pytest.approx(theirs["sop_accuracy"])


@pytest.mark.parametrize("family, first_token", [("roberta", "<s>"), ("distilbert", "[CLS]")])
def test_roberta_and_distilbert_continue_masked_lm_pretraining_from_their_directories(tmp_path, real_data, releases,
                                                                                       family, first_token):
    """create_pretraining_data.py --no_nsp with the family's vocabulary (RoBERTa's vocab.json,
    DistilBERT's vocab.txt), then run_pretraining.py --no_nsp from its directory as post-LN and
    RealFormer: the post-LN run's evaluation before its first step is transformers'
    ...ForMaskedLM's masked-LM loss on the same records (DistilBERT given no token types), and
    both runs train."""
    release, vocab = releases(family)
    histories, theirs, records = _continue_pretraining(tmp_path, real_data, release, vocab, "--no_nsp")
    first_id = (json.loads(vocab.read_text())[first_token] if vocab.suffix == ".json"
                else vocab.read_text().splitlines().index(first_token))
    assert all(record["input_ids"][0] == first_id for record in records)
    assert histories["none"][0]["masked_lm_loss"] == pytest.approx(theirs["mlm"], abs=1e-4)


@pytest.mark.parametrize("family", ["roberta", "albert", "distilbert"])
def test_each_family_answers_squad_questions_as_post_ln_and_realformer_from_its_directory(tmp_path, releases,
                                                                                           family):
    """run_squad.py from the family's directory (the document tokenized word by word with its
    vocabulary; RoBERTa's `<s> Q </s></s> D </s>`, the others' `[CLS] Q [SEP] D [SEP]`) on real
    SQuAD questions, as post-LN and RealFormer; the post-LN run, converted back, is the family's
    ForQuestionAnswering class whose logits on the run's windows give the run's own
    predictions.json."""
    from conftest import squad_first_answers

    from bert_realformer.tasks import squad
    from tokenization.vocabularies import tokenizer_for
    release, vocab = releases(family)
    real = squad_first_answers()
    questions = tmp_path / "squad.json"
    questions.write_text(json.dumps(real))
    for variant in ("none", "sum"):
        answered = script_processes.run(
            [sys.executable, os.path.join(ROOT, "run_squad.py"), f"--vocab_file={vocab}",
             f"--bert_config_file={release}/config.json", f"--init_checkpoint={release}",
             f"--residual_attention={variant}", f"--output_dir={tmp_path}/squad_{variant}", "--do_train",
             f"--train_file={questions}", "--do_predict", f"--predict_file={questions}", "--max_seq_length=38",
             "--doc_stride=16", "--max_query_length=12", "--train_batch_size=4", "--num_train_epochs=2",
             "--learning_rate=1e-3"], capture_output=True, text=True, timeout=900)
        assert answered.returncode == 0, answered.stderr[-3000:]
    ours = json.loads((tmp_path / "squad_none" / "predictions.json").read_text())
    assert len(ours) == 5
    result = convert("--from=ours", "--to=hf", f"--input={tmp_path}/squad_none", f"--vocab_file={vocab}",
                     f"--output={tmp_path}/back")
    assert result.returncode == 0, result.stderr[-3000:]
    tokenizer = tokenizer_for(str(vocab))
    examples, _ = squad.read_squad_examples(str(questions), False)
    features = squad.convert_examples_to_features(examples, tokenizer, 38, 16, 12, False)
    separators = 3 if family == "roberta" else 2
    assert all(f.tokens[0] == tokenizer.cls_token and f.tokens.count(tokenizer.sep_token) == separators
               for f in features)
    code = ("import json, sys, torch, transformers\n"
            "m = getattr(transformers, sys.argv[2]).from_pretrained(sys.argv[1]).eval()\n"
            "r = {k: torch.tensor(v) for k, v in json.loads(sys.stdin.read()).items()}\n"
            "with torch.no_grad():\n"
            "    out = m(**r)\n"
            "print(json.dumps({'start': out.start_logits.tolist(), 'end': out.end_logits.tolist()}))\n")
    request = {"input_ids": [f.input_ids for f in features], "attention_mask": [f.input_mask for f in features],
               # (ALBERT's two token types; RoBERTa's one and DistilBERT's none take no segment ids)
               **({"token_type_ids": [f.segment_ids for f in features]} if family == "albert" else {})}
    served = script_processes.run([sys.executable, "-c", code, str(tmp_path / "back"),
                                   FAMILIES[family][0] + "ForQuestionAnswering"], input=json.dumps(request),
                                  capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    logits = json.loads(served.stdout.strip().splitlines()[-1])
    results = [squad.RawResult(f.unique_id, start, end)
               for f, start, end in zip(features, logits["start"], logits["end"], strict=True)]
    theirs, _, _ = squad.compute_predictions(examples, features, results, 20, 30, tokenizer.do_lower_case,
                                             decode=tokenizer.decode)
    assert theirs == ours
    contexts = [p["context"] for a in real["data"] for p in a["paragraphs"] for _ in p["qas"]]
    assert all(answer in context for answer, context in zip(ours.values(), contexts, strict=True))
