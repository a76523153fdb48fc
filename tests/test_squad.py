"""SQuAD: the official metrics by hand, the original algorithm on real data with oracle logits,
v2.0 null answers, run_squad.py end to end, and bad input."""

import json
import os
import sys

import pytest
from conftest import allennlp_fixture, oracle_results, squad_first_answers
from helpers import script_processes
from helpers.in_process import completed_in_process

from bert_realformer.checkpoints.config_files import read_config
from bert_realformer.errors import InputError
from bert_realformer.tasks import squad
from bert_realformer.tasks.squad import metrics as squad_evaluate
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
VOCAB_EN = os.path.join(DATA, "tokenization", "vocab_en_uncased.txt")


def allennlp_squad():
    return allennlp_fixture("squad.json")


# ------------------------------------------------------------------ official metrics by hand
def test_normalisation_exact_and_f1_by_hand():
    assert squad_evaluate.normalize_answer("The  Golden, statue!") == "golden statue"
    assert squad_evaluate.exact_score("a golden statue", "Golden statue.") == 1
    # gold "golden statue of mary" (4 tokens) vs "statue of the virgin mary" -> "statue of virgin mary"
    # common: statue, of, mary = 3; P = 3/4, R = 3/4, F1 = 0.75.
    assert squad_evaluate.f1_score("a golden statue of Mary", "statue of the Virgin Mary") == pytest.approx(0.75)
    assert squad_evaluate.f1_score("", "") == 1.0 and squad_evaluate.f1_score("", "x") == 0.0


def test_v2_keys_splits_and_best_threshold_by_hand():
    dataset = [{"paragraphs": [{"context": "c", "qas": [
        {"id": "a", "answers": [{"text": "red car"}, {"text": "car"}]},
        {"id": "b", "answers": [{"text": "blue"}]},
        {"id": "c", "answers": []}]}]}]
    predictions = {"a": "the car", "b": "green", "c": ""}
    result = squad_evaluate.evaluate(dataset, predictions)
    assert result["exact"] == pytest.approx(100 * 2 / 3) and result["total"] == 3
    assert result["HasAns_exact"] == 50.0 and result["HasAns_total"] == 2
    assert result["NoAns_exact"] == 100.0 and result["NoAns_total"] == 1
    # With null odds: sorted by odds c(0.1) a(0.5) b(0.9); start 1 (one no-answer question);
    # c: prediction "" -> +0; a: +1 -> 2 (best, thresh 0.5); b: +0. best_exact = 2/3.
    result = squad_evaluate.evaluate(dataset, predictions, {"a": 0.5, "b": 0.9, "c": 0.1})
    assert result["best_exact"] == pytest.approx(100 * 2 / 3) and result["best_exact_thresh"] == 0.5
    # A threshold below b's odds turns b into "no answer" (wrong, it has one) -> still 0 for b.
    low = squad_evaluate.evaluate(dataset, predictions, {"a": 0.0, "b": 0.9, "c": 0.1}, na_prob_thresh=0.5)
    assert low["exact"] == pytest.approx(100 * 2 / 3)


def test_evaluate_command_line(tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [{"paragraphs": [{"context": "c", "qas": [
        {"id": "q", "answers": [{"text": "Paris"}]}]}]}]}))
    preds = tmp_path / "pred.json"
    preds.write_text(json.dumps({"q": "paris"}))
    result = script_processes.run([sys.executable, "-m", "bert_realformer.tasks.squad.metrics", str(data), str(preds)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["exact"] == 100.0 and out["f1"] == 100.0 and out["HasAns_total"] == 1


# ------------------------------------------------------------------ the algorithm on real data
def _vocabulary(kind, directory, real_data):
    """A vocabulary of `kind`: the English WordPiece vocab.txt, or a SentencePiece model (ALBERT's
    special pieces) or byte-level BPE (RoBERTa's) trained here on real English lines."""
    if kind == "wordpiece":
        return VOCAB_EN
    lines = [line.lower() for line in real_data.english_sentences()[:6000]]
    if kind == "sentencepiece":
        spm = pytest.importorskip("sentencepiece")
        with open(directory / "spiece.model", "wb") as model:
            spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=3000,
                                           pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                                           control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2)
        return str(directory / "spiece.model")
    tokenizers = pytest.importorskip("tokenizers")
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(real_data.english_sentences()[:6000], vocab_size=3000,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    bpe.save_model(str(directory))
    return str(directory / "vocab.json")


@pytest.mark.parametrize("kind", ["wordpiece", "sentencepiece", "bpe"])
def test_oracle_logits_score_100_on_real_squad(tmp_path, kind, real_data):
    """The gold spans of real SQuAD questions, found in windows of each vocabulary's tokens (the
    document tokenized word by word: ALBERT's and RoBERTa's too, their own tokens around the
    question) and singled out by the logits, map back onto the documents' exact answers."""
    from tokenization.vocabularies import tokenizer_for
    path = allennlp_squad()
    tokenizer = tokenizer_for(_vocabulary(kind, tmp_path, real_data))
    # The gold positions come from the first answer of each question (a dev file has several).
    first_answers = tmp_path / "first_answers.json"
    first_answers.write_text(json.dumps(squad_first_answers()))
    examples, skipped = squad.read_squad_examples(str(first_answers), True)
    assert len(examples) == 5 and skipped == 0
    assert len(squad.read_squad_examples(path, False)[0]) == 5
    # Short windows, so that several windows per question and max-context scoring are exercised.
    features = squad.convert_examples_to_features(examples, tokenizer, 96, 32, 24, True)
    assert {f.example_index for f in features} == set(range(5))
    assert len(features) > 5
    predictions, nbest, _ = squad.compute_predictions(examples, features, oracle_results(features), 20, 30,
                                                     tokenizer.do_lower_case, decode=tokenizer.decode)
    with open(path, encoding="utf-8") as f:
        dataset = json.load(f)["data"]
    if kind == "wordpiece":
        assert squad_evaluate.evaluate_v1(dataset, predictions) == {"exact_match": 100.0, "f1": 100.0}
    for example in examples:
        # (a gold answer ending inside a word -- "Father Julius Nieuwl" of "Nieuwland" -- is
        # answered to the end of the token it ends in: spans are of whole tokens)
        word, last = example.doc_tokens[example.end_position], example.orig_answer_text.split()[-1]
        pieces = tokenizer.tokenize_word(word)
        ends = [len(tokenizer.decode(pieces[:k]).strip()) for k in range(1, len(pieces) + 1)]
        expected = example.orig_answer_text + word[len(last):min(end for end in ends if end >= len(last))]
        assert predictions[example.qas_id] == expected, (kind, pieces)
    assert all(abs(sum(e["probability"] for e in entries) - 1) < 1e-6 for entries in nbest.values())


def test_get_final_text_restores_original_characters():
    assert squad.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert squad.get_final_text("1895", "(1895-1943)", True) == "1895"
    assert squad.get_final_text("xyz", "Steve", True) == "Steve"  # no alignment: the original


V2 = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
    "context": "The Normans gave their name to Normandy, a region in France.",
    "qas": [{"id": "has", "question": "To which region did the Normans give their name?",
             "answers": [{"text": "Normandy", "answer_start": 32}], "is_impossible": False},
            {"id": "none", "question": "Who gave their name to Italy?", "answers": [],
             "is_impossible": True}]}]}]}


def test_v2_null_answer_with_oracle_logits(tmp_path):
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(V2))
    tokenizer = FullTokenizer(VOCAB_EN)
    examples, _ = squad.read_squad_examples(str(path), True, version_2_with_negative=True)
    assert [e.is_impossible for e in examples] == [False, True]
    features = squad.convert_examples_to_features(examples, tokenizer, 64, 32, 24, True)
    predictions, _, null_odds = squad.compute_predictions(examples, features, oracle_results(features),
                                                         20, 30, True, version_2_with_negative=True)
    assert predictions == {"has": "Normandy", "none": ""}
    assert null_odds["none"] > 0 > null_odds["has"]
    result = squad_evaluate.evaluate(V2["data"], predictions, null_odds)
    assert result["exact"] == 100.0 and result["NoAns_total"] == 1 and result["best_f1"] == 100.0


def test_mismatched_offsets_are_skipped_and_counted_and_bad_files_fail(tmp_path):
    broken = json.loads(json.dumps(V2))
    broken["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 5
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    examples, skipped = squad.read_squad_examples(str(path), True, True)
    assert skipped == 1 and len(examples) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="bad.json: not a SQuAD JSON file"):
        squad.read_squad_examples(str(bad), False)
    with pytest.raises(InputError, match="nope.json: cannot be read"):
        squad.read_squad_examples(str(tmp_path / "nope.json"), False)


@pytest.mark.slow
def test_run_squad_trains_and_writes_the_three_files(tmp_path):
    """A tiny model trains a few steps on the real questions (first answers) plus our v2.0 case,
    then predicts the real file and scores it."""
    real = squad_first_answers()
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": real["data"] + V2["data"]}))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "intermediate_size": 64,
                                  "max_position_embeddings": 64, "type_vocab_size": 2}))
    common = [sys.executable, os.path.join(ROOT, "run_squad.py"), f"--vocab_file={VOCAB_EN}",
              f"--bert_config_file={config}", f"--output_dir={tmp_path}/out", "--do_predict",
              f"--predict_file={allennlp_squad()}", "--do_eval", "--version_2_with_negative",
              "--max_seq_length=64", "--doc_stride=32", "--max_query_length=24", "--train_batch_size=4"]
    result = script_processes.run(common + ["--do_train", f"--train_file={path}", "--num_train_epochs=3"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "out"
    assert "training on 7 questions (0 skipped)" in result.stderr
    assert "step 5/5" in result.stderr  # int(7 questions / 4 * 3 epochs), not counted from windows
    predictions = json.loads((out / "predictions.json").read_text())
    assert len(predictions) == 5
    assert set(json.loads((out / "null_odds.json").read_text())) == set(predictions)
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert all(1 <= len(entries) <= 21 for entries in nbest.values())  # n-best, plus "" (v2.0)
    assert "HasAns_total = 5" in (out / "eval_results.txt").read_text()

    # Predict-only in a second process: the fine-tuned weights from --output_dir, the same files.
    first = {name: (out / name).read_text() for name in
             ("predictions.json", "nbest_predictions.json", "null_odds.json", "eval_results.txt")}
    for name in first:
        (out / name).unlink()
    again = script_processes.run(common, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {name: (out / name).read_text() for name in first} == first
    assert f"weights: training state {out}/training_state/ckpt-5 (step 5)" in again.stderr

    # Training again over the cached train.tf_record: re-used with the same flags (the run is
    # already at its last step); a flag that shapes the windows changed is refused, the cache kept
    # (the training state was made from the first windows).
    train_only = [c for c in common if c not in ("--do_predict", "--do_eval")] + [
        "--do_train", f"--train_file={path}", "--num_train_epochs=3"]
    same = completed_in_process("run_squad.py", *train_only[2:])  # (what a re-run reads: no new process needed)
    assert same.returncode == 0 and f"re-used {out}/train.tf_record" in same.stderr, same.stderr[-3000:]
    other = completed_in_process("run_squad.py", *[c for c in train_only[2:] if c != "--doc_stride=32"],
                                 "--doc_stride=16")
    assert other.returncode == 2, other.stderr[-3000:]
    assert other.stderr.strip().splitlines()[-1] == (
        f"error: --doc_stride=16: {out} holds a run made with --doc_stride=32 ({out}/training_options.json); run "
        "again with --doc_stride=32 to go on with it, or give a new --output_dir")


@pytest.mark.slow
def test_extract_features_outputs_the_models_own_layers(tmp_path):
    import numpy as np

    import modeling
    from bert_realformer import checkpoints
    postln = os.path.join(DATA, "bert_postln_tiny")
    (tmp_path / "in.txt").write_text("The cat sat on the mat ||| Dogs played in snow.\nHi\n", encoding="utf-8")
    flags = [f"--input_file={tmp_path}/in.txt", f"--vocab_file={postln}/vocab.txt",
             f"--bert_config_file={postln}/bert_config.json", f"--init_checkpoint={postln}/bert_model.ckpt",
             "--layers=-1,-2", "--max_seq_length=16", "--batch_size=1"]
    result = completed_in_process("extract_features.py", *flags, f"--output_file={tmp_path}/out.jsonl")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["linex_index"] for line in lines] == [0, 1]
    first = lines[0]["features"]
    assert [f["token"] for f in first] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]",
                                           "dog", "##s", "play", "##ed", "in", "snow", ".", "[SEP]"]
    # The fixture's row 0 is this text before masking: compare with the model's layers directly.
    config = read_config(os.path.join(postln, "bert_config.json"))
    model = modeling.BertModel(config)
    checkpoints.load_tf1_checkpoint(model, postln)
    io = np.load(os.path.join(postln, "io.npz"))
    tokenizer = FullTokenizer(os.path.join(postln, "vocab.txt"))
    ids = np.array([tokenizer.convert_tokens_to_ids([f["token"] for f in first])], "int32")
    out = model({"input_ids": ids, "token_type_ids": io["token_type_ids"][:1]})
    for position, feature in enumerate(first):
        assert [layer["index"] for layer in feature["layers"]] == [-1, -2]
        for slot, layer in enumerate((-1, -2)):
            np.testing.assert_allclose(feature["layers"][slot]["values"], out["all_encoder_layers"][layer][0, position],
                                       atol=1e-5)
    assert [f["token"] for f in lines[1]["features"]] == ["[CLS]", "hi", "[SEP]"]
    # Every batch padded to --max_seq_length (the original's path): the same values.
    fixed = completed_in_process("extract_features.py", *flags, "--nodynamic_padding",
                                 f"--output_file={tmp_path}/fixed.jsonl")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    for ours, theirs in zip(lines, [json.loads(line) for line in (tmp_path / "fixed.jsonl").read_text().splitlines()],
                            strict=True):
        for a, b in zip(ours["features"], theirs["features"], strict=True):
            for x, y in zip(a["layers"], b["layers"], strict=True):
                np.testing.assert_allclose(x["values"], y["values"], atol=2e-6)


def test_answers_that_cannot_be_mapped_back_are_logged(caplog):
    """What run_squad.py's --verbose_logging shows (the loggers' INFO level)."""
    with caplog.at_level("INFO", logger="bert_realformer.tasks.squad"):
        assert squad.get_final_text("xyz", "Steve", True) == "Steve"
    assert "unable to find 'xyz' in 'Steve'" in caplog.text
