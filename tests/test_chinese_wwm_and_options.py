"""Chinese whole-word masking, reference files, no-NSP data, shard mode and bad input."""

import json
import os

import pytest
from test_create_pretraining_data import FIXTURE, FIXTURE_FLAGS, VOCAB_EN, VOCAB_ZH, create, read_records

from pretraining.documents import LineTokenizer
from tokenization import FullTokenizer
from tokenization.chinese import ContinuationToken, mark_words

ZH_FLAGS = ["--do_lower_case=True", "--max_seq_length=64", "--max_predictions_per_seq=10",
            "--dupe_factor=2", "--random_seed=7", "--do_whole_word_mask=True"]


def test_mark_words_marks_non_first_characters_of_multi_character_words():
    tokens = ["我", "爱", "北", "京", "天", "安", "门", "hello", "2024", "年"]
    marked = mark_words(tokens, ["我", "爱", "北京", "天安门", " ", "hello", "2024", "年"])
    assert marked == tokens  # values (so ids) unchanged
    assert [isinstance(t, ContinuationToken) for t in marked] == [
        False, False, False, True, False, True, True, False, False, False]


def test_jieba_line_tokenizer_keeps_ids_and_marks_continuations():
    line = "中共中央总书记、国家主席江泽民发表新年讲话。"
    plain = FullTokenizer(VOCAB_ZH).tokenize_to_ids(line)
    marked = list(LineTokenizer(VOCAB_ZH, True, "jieba")(line))
    assert [t if t >= 0 else -t - 1 for t in marked] == plain
    assert sum(t < 0 for t in marked) >= 8  # 中共中央, 总书记, 国家, 主席, 江泽民, 发表, 新年, 讲话


@pytest.fixture
def chinese_corpus(real_data, tmp_path):
    path = str(tmp_path / "zh.txt")
    real_data.write_peoples_daily_corpus(path, max_documents=150)
    return path




def test_jieba_whole_word_masking_masks_whole_words(tmp_path, chinese_corpus):
    result, output = create(tmp_path, *ZH_FLAGS, "--chinese_word_segmentation=jieba",
                            input_file=chinese_corpus, vocab=VOCAB_ZH)
    assert result.returncode == 0, result.stderr
    plain_result, plain_output = create(tmp_path, *ZH_FLAGS, input_file=chinese_corpus,
                                        vocab=VOCAB_ZH, output="plain.tfrecord")
    assert plain_result.returncode == 0, plain_result.stderr
    records, plain = read_records(output), read_records(plain_output)
    vocab = FullTokenizer(VOCAB_ZH).inv_vocab
    assert all(max(r["masked_lm_ids"]) < len(vocab) and min(r["masked_lm_ids"]) >= 0 for r in records)
    # Masked spans: with word segmentation, runs of 2+ adjacent masked CJK positions are common
    # (whole words); per-character masking rarely masks neighbours.
    def adjacent_pairs(rs):
        count = 0
        for r in rs:
            positions = [p for p, w in zip(r["masked_lm_positions"], r["masked_lm_weights"]) if w]
            count += sum(1 for a, b in zip(positions, positions[1:]) if b == a + 1)
        return count / sum(sum(1 for w in r["masked_lm_weights"] if w) for r in rs)
    assert adjacent_pairs(records) > 2 * adjacent_pairs(plain)


def test_reference_file_gives_the_same_data_as_jieba(tmp_path, chinese_corpus):
    """A run_chinese_ref.py-style file made from the same segmentation reproduces the run."""
    line_tokenizer = LineTokenizer(VOCAB_ZH, True, "jieba")
    ref = tmp_path / "ref.txt"
    with open(chinese_corpus, encoding="utf-8") as f, open(ref, "w") as out:
        for line in f:
            if line.strip():
                ids = line_tokenizer(line.strip())
                out.write(json.dumps([i + 1 for i, t in enumerate(ids) if t < 0]) + "\n")
    a, out_a = create(tmp_path, *ZH_FLAGS, "--chinese_word_segmentation=jieba",
                      input_file=chinese_corpus, vocab=VOCAB_ZH, output="a.tfrecord")
    b, out_b = create(tmp_path, *ZH_FLAGS, f"--chinese_ref_file={ref}",
                      input_file=chinese_corpus, vocab=VOCAB_ZH, output="b.tfrecord")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert read_records(out_a) == read_records(out_b)


def test_no_nsp_fills_instances_with_contiguous_text(tmp_path):
    result, output = create(tmp_path, *FIXTURE_FLAGS, "--no_nsp")
    assert result.returncode == 0, result.stderr
    records = read_records(output)
    sep = FullTokenizer(VOCAB_EN).vocab["[SEP]"]
    for r in records:
        n = sum(r["input_mask"])
        assert r["next_sentence_labels"] == [0] and not any(r["segment_ids"])
        assert r["input_ids"][n - 1] == sep and r["input_ids"][:n].count(sep) == 1
    lengths = [sum(r["input_mask"]) for r in records]
    assert max(lengths) == 64


def test_shard_mode_writes_one_file_per_input_with_its_own_seed(tmp_path):
    with open(os.path.join(FIXTURE, "input.txt"), encoding="utf-8") as f:
        documents = f.read().split("\n\n")
    half = len(documents) // 2
    inputs = [tmp_path / "part_a.txt", tmp_path / "part_b.txt"]
    inputs[0].write_text("\n\n".join(documents[:half]) + "\n", encoding="utf-8")
    inputs[1].write_text("\n\n".join(documents[half:]), encoding="utf-8")
    flags = [f for f in FIXTURE_FLAGS if not f.startswith("--random_seed")] + ["--random_seed=100"]
    result, out_dir = create(tmp_path, *flags, "--shard_mode", input_file=f"{tmp_path}/part_*.txt",
                             output="shards")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out_dir)) == ["part_a.tfrecord", "part_b.tfrecord"]
    for index, name in enumerate(("part_a", "part_b")):
        single_flags = flags[:-1] + [f"--random_seed={100 + index}"]
        single, single_out = create(tmp_path, *single_flags, input_file=str(inputs[index]),
                                    output=f"{name}-alone.tfrecord")
        assert single.returncode == 0
        assert read_records(os.path.join(out_dir, f"{name}.tfrecord")) == read_records(single_out)


@pytest.mark.parametrize("flags,kwargs,message", [
    ([], {"vocab": "/nonexistent/vocab.txt"}, "--vocab_file=/nonexistent/vocab.txt: no such file"),
    ([], {"input_file": "/nonexistent/*.txt"}, "--input_file: /nonexistent/*.txt matches no file"),
    (["--max_seq_length=4"], {}, "--max_seq_length=4 is too small for [CLS] A [SEP] B [SEP]"),
    (["--chinese_word_segmentation=jieba"], {}, "add --do_whole_word_mask=True"),
    (["--masked_lm_prob=0"], {}, "--masked_lm_prob=0.0: must be in (0, 1]"),
])
def test_bad_input_is_one_line_and_leaves_no_output(tmp_path, flags, kwargs, message):
    result, output = create(tmp_path, *flags, **kwargs)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1]
    assert not os.path.exists(output)


def test_empty_vocab_and_empty_corpus(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result, _ = create(tmp_path, vocab=str(empty))
    assert result.returncode == 2 and "the file is empty" in result.stderr
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n   \n\x00\n")
    result, output = create(tmp_path, input_file=str(blank))
    assert result.returncode == 2 and "holds no text" in result.stderr
    assert os.listdir(tmp_path) == ["empty.txt", "blank.txt"] or not os.path.exists(output)
