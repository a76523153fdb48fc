"""Chinese machine reading comprehension: CJK contexts as exact character spans, the CMRC 2018
metric by hand, oracle logits on the real CMRC 2018 sample, and run_squad.py end to end."""

import json
import os
import sys

import pytest
from conftest import allennlp_fixture, oracle_results
from helpers import script_processes
from helpers.in_process import completed_in_process

from bert_realformer.tasks import squad
from bert_realformer.tasks.squad import cmrc2018_metrics as cmrc2018_evaluate
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
TRIAL = os.path.join(DATA, "cmrc2018", "cmrc2018_trial_sample.json")
DEV = os.path.join(DATA, "cmrc2018", "cmrc2018_dev_sample.json")
VOCAB_ZH = os.path.join(DATA, "tokenization", "vocab_zh.txt")


def test_context_words_around_cjk_and_unchanged_english():
    words, spaced, char_to_word = squad.split_context("由韩国Nexon开发 与 Sun Co.发行。")
    assert words == ["由", "韩", "国", "Nexon", "开", "发", "与", "Sun", "Co.", "发", "行", "。"]
    assert squad.join_words(words[1:6], spaced[1:6]) == "韩国Nexon开发"
    assert squad.join_words(words[5:9], spaced[5:9]) == "发 与 Sun Co."
    assert char_to_word[3:8] == [3, 3, 3, 3, 3]
    # Text without CJK characters: the original's whitespace split and " ".join.
    with open(allennlp_fixture("squad.json"), encoding="utf-8") as f:
        contexts = [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]]
    for context in contexts:
        words, spaced, _ = squad.split_context(context)
        assert words == context.split() and squad.join_words(words, spaced) == " ".join(words)


def test_cmrc2018_metric_by_hand():
    f1 = cmrc2018_evaluate.f1_score
    assert f1(["北京大学"], "北京") == pytest.approx(2 / 3)         # LCS 2: P 1, R 1/2
    # '、' is removed before segmenting, so "2V2" and "4V4" become one word "2v24v4".
    assert f1(["2V2、4V4随机配对"], "4V4随机") == pytest.approx(0.5)  # LCS 2: P 2/3, R 2/5
    # '-' removed: gold [光 荣 和 ωforce], predicted [光 荣 和 ω force]: LCS 3, P 3/5, R 3/4;
    # the second answer [光 荣]: P 2/5, R 1 (F1 4/7). The best of the two counts.
    assert f1(["光荣和ω-force", "光荣"], "光荣和ω force") == pytest.approx(2 / 3)
    assert f1(["踢爆"], "") == 0.0
    assert cmrc2018_evaluate.exact_score(["《泡泡堂》"], "泡泡堂") == 1
    assert cmrc2018_evaluate.exact_score(["光荣和ω-force"], "光荣和ω force") == 0
    segments = cmrc2018_evaluate.mixed_segmentation("Nexon时隔6年，再次")
    assert segments == ["nexon", "时", "隔", "6", "年", "，", "再", "次"]
    dataset = [{"paragraphs": [{"qas": [
        {"id": "a", "answers": [{"text": "北京大学"}]}, {"id": "b", "answers": [{"text": "踢爆"}]},
        {"id": "c", "answers": [{"text": "六年"}]}]}]}]
    result = cmrc2018_evaluate.evaluate(dataset, {"a": "北京", "b": "踢爆"})
    assert result["TOTAL"] == 3 and result["SKIP"] == 1
    assert result["EM"] == pytest.approx(100 / 3) and result["F1"] == pytest.approx(100 * (2 / 3 + 1) / 3)
    assert result["AVERAGE"] == pytest.approx((result["EM"] + result["F1"]) / 2)


def test_oracle_logits_score_100_on_real_cmrc2018(tmp_path):
    """Gold start/end logits give back every gold answer exactly: no character inserted or lost."""
    with open(DEV, encoding="utf-8") as f:
        data = json.load(f)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    first = tmp_path / "first_answers.json"
    first.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    examples, skipped = squad.read_squad_examples(str(first), True)
    assert len(examples) == 27 and skipped == 0
    tokenizer = FullTokenizer(VOCAB_ZH)
    features = squad.convert_examples_to_features(examples, tokenizer, 128, 64, 32, True)
    assert len(features) > len(examples)  # several windows per long paragraph
    predictions, _, _ = squad.compute_predictions(examples, features, oracle_results(features), 20, 64, True)
    with open(DEV, encoding="utf-8") as f:
        result = cmrc2018_evaluate.evaluate(json.load(f)["data"], predictions)
    assert result["EM"] == 100.0 and result["F1"] == 100.0 and result["SKIP"] == 0
    # The command-line scorer prints the official script's JSON.
    predictions_file = tmp_path / "predictions.json"
    predictions_file.write_text(json.dumps(predictions, ensure_ascii=False), encoding="utf-8")
    cli = script_processes.run([sys.executable, "-m", "bert_realformer.tasks.squad.metrics", "--metric=cmrc2018", DEV,
                          str(predictions_file)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == {"AVERAGE": "100.000", "F1": "100.000", "EM": "100.000", "TOTAL": 27,
                                      "SKIP": 0, "FILE": str(predictions_file)}


@pytest.mark.slow
def test_run_squad_on_cmrc2018_from_scratch(tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 21128, "hidden_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "intermediate_size": 128,
                                  "max_position_embeddings": 256, "type_vocab_size": 2}))
    out = tmp_path / "out"
    result = completed_in_process("run_squad.py", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
         f"--output_dir={out}", "--do_train", f"--train_file={TRIAL}", "--do_predict", f"--predict_file={DEV}",
         "--do_eval", "--eval_metric=cmrc2018", "--max_seq_length=256", "--doc_stride=128",
         "--max_query_length=32", "--train_batch_size=8", "--learning_rate=5e-4", "--num_train_epochs=4",
         "--max_answer_length=20", "--eval_every_steps=24")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "training on 97 questions (0 skipped)" in result.stderr
    values = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    assert sorted(values) == ["AVERAGE", "EM", "F1", "SKIP", "TOTAL", "global_step"] and values["TOTAL"] == "27"
    # Scored during training at steps 24 and 48 (the main metric: F1); the best one's answers.
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    best = json.loads((out / "best" / "best.json").read_text())
    assert [point["step"] for point in history] == [24, 48] and best["metric"] == "F1"
    assert best["value"] == max(point["F1"] for point in history)
    assert float(values["F1"]) == pytest.approx(best["value"])
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    with open(DEV, encoding="utf-8") as f:
        contexts = {qa["id"]: p["context"] for a in json.load(f)["data"] for p in a["paragraphs"] for qa in p["qas"]}
    assert set(predictions) == set(contexts)
    for qid, text in predictions.items():
        assert text and text in contexts[qid], (qid, text)
