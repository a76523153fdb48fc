"""The reference tokenizer against the ORIGINAL tokenizer's output (tests/data/tokenization)."""

import json
import os

import pytest
from helpers import script_processes

from tokenization import FullTokenizer, load_vocab, validate_case_matches_checkpoint

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tokenization")
CASES = [("cases.jsonl", "vocab_en_uncased.txt"), ("cases_zh.jsonl", "vocab_zh.txt")]


def read_cases(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().split("\n") if line]


@pytest.mark.parametrize("cases,vocab", CASES)
@pytest.mark.parametrize("lower", [True, False])
def test_reference_reproduces_original_token_for_token(cases, vocab, lower):
    tokenizer = FullTokenizer(vocab_file=os.path.join(DATA, vocab), do_lower_case=lower)
    key = "lower" if lower else "cased"
    mismatches = []
    for number, case in enumerate(read_cases(cases)):
        tokens = tokenizer.tokenize(case["text"])
        if tokens != case[key] or tokenizer.convert_tokens_to_ids(tokens) != case[key + "_ids"]:
            mismatches.append((number, case["text"], tokens, case[key]))
    assert mismatches == []


def test_vocab_reading_splits_on_newline_only():
    vocab = load_vocab(os.path.join(DATA, "vocab_zh.txt"))
    assert len(vocab) == 21128 - 0  # no line of its own for U+2028
    assert vocab[""] == 343 and vocab["##"] == 13502
    assert vocab["[UNK]"] == 100 and vocab["[MASK]"] == 103


def test_ids_round_trip():
    tokenizer = FullTokenizer(vocab_file=os.path.join(DATA, "vocab_en_uncased.txt"))
    tokens = tokenizer.tokenize("Unaffable tokenizers, don't they?")
    assert tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids(tokens)) == tokens


def test_case_check_against_known_checkpoints():
    validate_case_matches_checkpoint(True, "/x/uncased_L-12_H-768_A-12/bert_model.ckpt")
    validate_case_matches_checkpoint(False, "/x/my_model/bert_model.ckpt")
    with pytest.raises(ValueError, match="do_lower_case=True"):
        validate_case_matches_checkpoint(False, "/x/uncased_L-12_H-768_A-12/bert_model.ckpt")
    with pytest.raises(ValueError, match="do_lower_case=False"):
        validate_case_matches_checkpoint(True, "gs://b/cased_L-12_H-768_A-12/bert_model.ckpt")


def _cli(args, stdin):
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return script_processes.run([sys.executable, "-m", "tokenization", *args], input=stdin, cwd=root,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("fast", [False, True])
def test_command_line_writes_one_json_list_per_line(fast):
    vocab = os.path.join(DATA, "vocab_zh.txt")
    args = [f"--vocab_file={vocab}", "--do_lower_case=true"] + (["--fast"] if fast else [])
    result = _cli(args, "Hello, world!\n你好，ＨＴＴＰ\n\n")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    assert lines == [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))
                     for t in ("Hello, world!", "你好，ＨＴＴＰ", "")]
    tokens = _cli(args + ["--tokens"], "你好，ＨＴＴＰ\n")
    assert json.loads(tokens.stdout) == ["你", "好", "，", "ｈ", "##ｔ", "##ｔ", "##ｐ"]


def test_command_line_missing_vocab_is_one_line():
    result = _cli(["--vocab_file=/nonexistent/vocab.txt"], "")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --vocab_file=/nonexistent/vocab.txt: no such file"
