"""--vocab_file against the model before any work: too many lines (duplicates named with their
lines), too few (one warning), a special token missing; run_classifier.py and
create_pretraining_data.py end in one line, exit 2, and write nothing."""

import json
import logging

import pytest
from helpers.in_process import completed_in_process
from test_run_classifier import TINY_ZH

from bert_realformer.errors import InputError
from bert_realformer.training.setup import check_vocabulary, duplicates

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab(tmp_path, tokens, name="vocab.txt"):
    path = tmp_path / name
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return str(path)


def test_duplicate_lines_that_push_ids_past_the_table_are_named(tmp_path):
    tokens = SPECIAL + ["a", "b", "a", "c", "b", "d", "e", "f", "g", "h"]
    vocab = _vocab(tmp_path, tokens)
    assert duplicates(tokens) == [("a", [6, 8]), ("b", [7, 10])]
    check_vocabulary(vocab, len(tokens))
    with pytest.raises(InputError) as refused:
        check_vocabulary(vocab, 14)
    assert str(refused.value) == (
        f"vocab_file={vocab} has 15 lines but the model's vocab_size is 14 (bert_config_file): ids from 14 on "
        "would index past its embedding table; 2 tokens are on more than one line ('a' on lines 6, 8; 'b' on "
        "lines 7, 10); use the vocabulary the checkpoint was trained with")


def test_a_shorter_vocabulary_is_one_warning(tmp_path, caplog):
    vocab = _vocab(tmp_path, SPECIAL + ["a"])
    with caplog.at_level(logging.WARNING):
        check_vocabulary(vocab, 10)
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"--vocab_file={vocab} has 6 lines but the model's vocab_size is 10: the model's last 4 tokens "
                    "can never be produced from text (an extended model's vocabulary is the one made with it)"]


@pytest.mark.parametrize("token", ["[UNK]", "[CLS]", "[SEP]"])
def test_a_vocabulary_without_a_special_token_is_refused(tmp_path, token):
    vocab = _vocab(tmp_path, [t for t in SPECIAL if t != token] + ["a"])
    with pytest.raises(InputError, match=rf"has no \{token[:-1]}\] line"):
        check_vocabulary(vocab, 10)


def _script(name, *flags):
    return completed_in_process(name, *flags)  # (refused before any work: no process start-up needed)


def test_the_scripts_refuse_a_vocabulary_without_unk_before_any_work(tmp_path):
    vocab = _vocab(tmp_path, [t for t in SPECIAL if t != "[UNK]"] + list("你好世界"))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(dict(TINY_ZH, vocab_size=8)))
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("1\t你好\n0\t世界\n", encoding="utf-8")
    out = tmp_path / "out"
    result = _script("run_classifier.py", "--task_name=thucnews", f"--data_dir={data}", f"--vocab_file={vocab}",
                     f"--bert_config_file={config}", f"--output_dir={out}", "--do_train")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --vocab_file={vocab} has no [UNK] line; a BERT vocabulary holds [UNK], [CLS], [SEP] (each on a "
        "line of its own)")
    assert not (out / "train.tf_record").exists()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("你好世界。\n世界你好。\n\n你好。\n", encoding="utf-8")
    output = tmp_path / "records.tfrecord"
    result = _script("create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={output}",
                     f"--vocab_file={vocab}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == f"error: --vocab_file={vocab}: the vocabulary has no [UNK] token"
    assert not output.exists()
