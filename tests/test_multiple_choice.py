"""Multiple choice: SWAG/JSON-lines reading, features by hand, the model's invariants, and
run_multiple_choice.py end to end on allennlp's QuaRel sample."""

import json
import os
import re

import numpy as np
import pytest
from conftest import allennlp_fixture
from helpers.in_process import completed_in_process

import modeling
from bert_realformer.errors import InputError
from bert_realformer.tasks import multiple_choice
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
VOCAB_EN = os.path.join(DATA, "tokenization", "vocab_en_uncased.txt")
SWAG_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def test_swag_csv_and_errors(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(SWAG_HEADER + 'lsmdc1,7,"She opens it. She","She opens it.","She",gold,'
                    'smiles.,"runs, fast.",sleeps.,cries.,1\n')
    (example,) = multiple_choice.read_swag(str(path))
    assert (example.context, example.start, example.choices, example.label) == (
        "She opens it.", "She", ["smiles.", "runs, fast.", "sleeps.", "cries."], 1)
    assert example.where == f"{path}:2"
    path.write_text(SWAG_HEADER + "a,1,x,y,z,gold,e0,e1,e2,e3,4\n")
    with pytest.raises(InputError, match=r"train.csv:2: label 4 is not one of the 4 choices"):
        multiple_choice.read_swag(str(path))
    path.write_text("sent1,sent2,ending0\nx,y,z\n")
    with pytest.raises(InputError, match=r"train.csv:1: missing column\(s\) ending1, ending2, ending3, label"):
        multiple_choice.read_swag(str(path))
    generic = tmp_path / "dev.jsonl"
    generic.write_text('{"context": "c", "choices": ["only one"], "label": 0}\n')
    with pytest.raises(InputError, match=r"dev.jsonl:1: expected \"choices\": a list of at least 2 strings"):
        multiple_choice.read_generic(str(generic))


def test_features_by_hand():
    tokenizer = FullTokenizer(VOCAB_EN, do_lower_case=True)
    examples = [multiple_choice.ChoiceExample("the cat", "it", ["sat", "ran away"], 1, "x:1"),
                multiple_choice.ChoiceExample("the dog barked loudly again", "", ["a", "b", "c"], 2, "x:2")]
    arrays = multiple_choice.choice_arrays(examples, tokenizer, 8)
    ids = lambda text: tokenizer.convert_tokens_to_ids(text.split())  # noqa: E731
    assert arrays["input_ids"].shape == (2, 3, 8)
    assert arrays["input_ids"][0, 1].tolist() == ids("[CLS] the cat [SEP] it ran away [SEP]")
    assert arrays["segment_ids"][0, 1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert arrays["input_ids"][0, 0].tolist() == ids("[CLS] the cat [SEP] it sat [SEP]") + [0]
    assert arrays["choice_mask"].tolist() == [[1, 1, 0], [1, 1, 1]] and arrays["label_ids"].tolist() == [1, 2]
    # Truncation as the original's pair rule: the longer text loses its last tokens.
    assert arrays["input_ids"][1, 2].tolist() == ids("[CLS] the dog barked loudly [SEP] c [SEP]")


def test_choices_are_scored_independently_and_padding_is_never_chosen():
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32)
    model = modeling.BertMultipleChoice(config)
    rng = np.random.RandomState(0)
    features = {"input_ids": rng.randint(1, 50, size=(2, 3, 8)).astype("int32"),
                "input_mask": np.ones((2, 3, 8), "int32"), "segment_ids": np.zeros((2, 3, 8), "int32"),
                "choice_mask": np.array([[1, 1, 0], [1, 1, 1]], "int32")}
    scores = np.asarray(model(features))
    permuted = {k: v[:, [2, 0, 1]] for k, v in features.items()}
    np.testing.assert_allclose(np.asarray(model(permuted)), scores[:, [2, 0, 1]], atol=1e-5)
    assert scores[0, 2] == -1e9 and np.all(np.abs(scores[:, :2]) < 100)


def _quarel_as_generic(path, out):
    """QuaRel's "... (A) first (B) second" questions as {"context", "choices", "label"}."""
    rows = []
    for line in open(path, encoding="utf-8"):
        obj = json.loads(line)
        context, a, b = re.match(r"(.*)\(A\)(.*)\(B\)(.*)", obj["question"]).groups()
        rows.append({"context": context.strip(), "choices": [a.strip(), b.strip().rstrip(".")],
                     "label": obj["answer_index"]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.mark.slow
def test_run_multiple_choice_on_quarel(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = _quarel_as_generic(allennlp_fixture("quarel.jsonl"), data / "train.jsonl")
    for name in ("dev.jsonl", "test.jsonl"):
        (data / name).write_text((data / "train.jsonl").read_text())
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "intermediate_size": 64,
                                  "max_position_embeddings": 128, "type_vocab_size": 2}))
    out = tmp_path / "out"
    result = completed_in_process("run_multiple_choice.py", "--task_name=generic",
         f"--data_dir={data}", f"--vocab_file={VOCAB_EN}", f"--bert_config_file={config}", f"--output_dir={out}",
         "--do_train", "--do_eval", "--do_predict", "--max_seq_length=96", "--train_batch_size=3",
         "--learning_rate=1e-3", "--num_train_epochs=30")
    assert result.returncode == 0, result.stderr[-3000:]
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    labels = np.array([r["label"] for r in rows])
    assert probabilities.shape == (3, 2)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
    # The metrics are the test file's probabilities scored by hand (dev and test are the same file).
    assert float(values["eval_accuracy"]) == pytest.approx(np.mean(probabilities.argmax(1) == labels))
    assert float(values["eval_loss"]) == pytest.approx(np.mean(-np.log(probabilities[np.arange(3), labels])),
                                                       rel=1e-5)
    assert values["global_step"] == "30"
    assert float(values["eval_accuracy"]) == 1.0  # 30 steps on its 3 questions: learnt by heart
