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


def test_a_vocabulary_other_than_the_checkpoints_own_is_refused(tmp_path):
    """The vocab.txt beside --init_checkpoint decides: the same lines or the lines it begins with
    (an extended checkpoint's old vocabulary) pass; another vocabulary is named with its first
    differing line."""
    from bert_realformer.checkpoints.files_beside import check_vocabulary_belongs
    release = tmp_path / "release"
    release.mkdir()
    own = SPECIAL + ["a", "b", "##c"]
    _vocab(release, own)
    checkpoint = str(release / "bert_model.ckpt")
    for tokens in (own, own[:-1]):
        check_vocabulary_belongs(_vocab(tmp_path, tokens, "mine.txt"), checkpoint, tokens)
    check_vocabulary_belongs(_vocab(tmp_path, own, "mine.txt"), str(tmp_path / "elsewhere" / "ckpt"), own)
    foreign = SPECIAL + ["a", "x", "##c"]
    mine = _vocab(tmp_path, foreign, "mine.txt")
    with pytest.raises(InputError, match=r"line 7 is 'x' there and 'b' in its own .*release/vocab.txt"):
        check_vocabulary_belongs(mine, checkpoint, foreign)
    with pytest.raises(InputError, match="line 9 is 'd' there and no line in its own"):
        check_vocabulary_belongs(mine, checkpoint, own + ["d"])


@pytest.mark.slow  # (a MiniLM run end to end)
def test_run_classifier_refuses_another_models_vocabulary_unless_allowed(tmp_path):
    """The real all-MiniLM-L6-v2 directory (30,522 English tokens) with the 21,128-line Chinese
    vocabulary: one line naming both before any data or state is written; --allow_foreign_vocab
    trains with it."""
    from helpers.minilm import minilm_dir
    from test_documented_recipes import VOCAB
    source = minilm_dir()
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("1\t你好\n0\t世界\n", encoding="utf-8")
    flags = ["--task_name=thucnews", f"--data_dir={data}", f"--vocab_file={VOCAB}", f"--init_checkpoint={source}",
             f"--bert_config_file={tmp_path / 'bert_config.json'}", "--do_train", "--num_train_epochs=1",
             "--max_seq_length=16"]
    config = json.load(open(f"{source}/config.json"))
    (tmp_path / "bert_config.json").write_text(json.dumps({key: config[key] for key in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "max_position_embeddings", "type_vocab_size")}))
    refused = _script("run_classifier.py", *flags, f"--output_dir={tmp_path / 'out'}")
    assert refused.returncode == 2, refused.stderr[-2000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --vocab_file={VOCAB} is not the vocabulary of --init_checkpoint={source}: "
                           f"line 2 is '[unused1]' there and '[unused0]' in its own {source}/vocab.txt"), last
    assert not (tmp_path / "out" / "train.tf_record").exists() and not (tmp_path / "out" / "training_state").exists()
    allowed = _script("run_classifier.py", *flags, "--allow_foreign_vocab", "--train_batch_size=2",
                      f"--output_dir={tmp_path / 'allowed'}")
    assert "is not the vocabulary" not in allowed.stderr and allowed.returncode == 0, allowed.stderr[-2000:]
