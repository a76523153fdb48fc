"""Chinese whole-word masking, reference files, no-NSP data, shard mode and bad input."""

import json
import os

import pytest
from helpers import script_processes
from test_create_pretraining_data import FIXTURE, FIXTURE_FLAGS, INPUT, VOCAB_EN, VOCAB_ZH, create, read_records

from bert_realformer.pretraining.documents import LineTokenizer
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
    real_data.write_peoples_daily_corpus(path, max_documents=25)
    return path




@pytest.mark.slow
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


@pytest.mark.slow
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


# A reference file exactly as Hugging Face's run_chinese_ref.py writes it, worked out by hand from
# its algorithm: one line per input line that is not blank (`line.isspace()` lines, such as an
# ideographic space, are skipped), `json.dumps` of the positions of the "##"-marked single Chinese
# characters in the tokens *with* [CLS] at 0, after truncation to 512 tokens; words from the
# segmenter that are not all Chinese (2024年, C罗) mark nothing; a "##" WordPiece that is not a
# Chinese character (##4) is not listed.
HF_REF_CORPUS = ("我爱北京天安门\r\n"          # 我/爱/北京/天安门: 京 4, 安 6, 门 7
                 "\n"
                 "\u3000\u3000\n"             # blank to run_chinese_ref.py too
                 "iPhone手机很好用\n"           # iphone 1, 手机 2-3, 很 4, 好用 5-6
                 "2024年是龙年\n"              # 202 1, ##4 2, 年 3, 是 4, 龙年 5-6
                 "hello world\n"               # no Chinese word: []
                 "Ｃ罗在皇马进球\n"             # ｃ 1, 罗 2, 在 3, 皇马 4-5, 进球 6-7
                 + "北京" * 300 + "\n")         # 600 characters; truncated to 510 after [CLS]
HF_REF_FILE = ("[4, 6, 7]\n[3, 6]\n[6]\n[]\n[5, 7]\n"
               + "[" + ", ".join(str(p) for p in range(2, 511, 2)) + "]\n")


def test_reference_file_in_run_chinese_ref_layout_marks_its_positions(tmp_path):
    from bert_realformer.pretraining import documents as docs
    corpus, ref = tmp_path / "zh.txt", tmp_path / "ref.txt"
    corpus.write_bytes(HF_REF_CORPUS.encode("utf-8"))
    ref.write_text(HF_REF_FILE, encoding="utf-8")
    docs.worker_pool((VOCAB_ZH, True, None), 1)  # this process tokenizes
    lines = [ids for ids in docs.tokenized_lines([str(corpus)], None, [str(ref)]) if ids is not docs.BLANK]
    continuing = [[i + 1 for i, t in enumerate(ids) if t < 0] for ids in lines]  # [CLS] counted as 0
    assert continuing[:5] == [[4, 6, 7], [3, 6], [6], [], [5, 7]]
    assert continuing[5] == list(range(2, 511, 2))  # past the 512-token truncation: not marked
    assert len(lines[5]) == 600
    result, output = create(tmp_path, *ZH_FLAGS, f"--chinese_ref_file={ref}", input_file=str(corpus),
                            vocab=VOCAB_ZH)
    assert result.returncode == 0, result.stderr


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


@pytest.mark.parametrize("later", [b"\n \n\t\n", b"fine line\nbad \xff line\n", b"\x00\n\x01\n"])
@pytest.mark.parametrize("use_native", [True, False])
def test_shard_mode_writes_nothing_when_a_later_input_is_bad(tmp_path, later, use_native):
    """A blank, non-UTF-8 or tokenizes-to-nothing file after good ones: one line naming it, and no
    shard of the good files, nor the shards directory, is left behind (the first two are caught
    before anything is written)."""
    (tmp_path / "a_good.txt").write_bytes(open(INPUT, "rb").read())
    (tmp_path / "b_bad.txt").write_bytes(later)
    result, out_dir = create(tmp_path, *FIXTURE_FLAGS, "--shard_mode", f"--use_native={use_native}",
                             input_file=f"{tmp_path}/*_*.txt", output="shards")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "b_bad.txt" in last
    if b"\xff" in later:
        assert "b_bad.txt:2: not UTF-8 (invalid start byte 0xff at column 5)" in last
    assert not os.path.exists(out_dir)  # not even the directory the run would have made


def test_non_utf8_corpus_is_one_error_naming_the_line(tmp_path):
    """The original decoded strictly; invalid bytes were silently dropped here before."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(open(INPUT, "rb").read() + b"caf\xe9 au lait\n")
    lines = open(INPUT, "rb").read().count(b"\n") + 1
    result, output = create(tmp_path, *FIXTURE_FLAGS, input_file=str(corpus))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {corpus}:{lines}: not UTF-8 (invalid continuation byte 0xe9 at column 4)")
    assert not os.path.exists(output)


@pytest.mark.parametrize("flags,kwargs,message", [
    ([], {"vocab": "/nonexistent/vocab.txt"}, "--vocab_file=/nonexistent/vocab.txt: no such file"),
    ([], {"input_file": "/nonexistent/*.txt"}, "--input_file: /nonexistent/*.txt matches no file"),
    (["--max_seq_length=4"], {}, "--max_seq_length=4 is too small for [CLS] A [SEP] B [SEP]"),
    (["--no_nsp", "--max_seq_length=3"], {}, "--max_seq_length=3 is too small for [CLS] A [SEP]: at least 4"),
    (["--no_nsp", "--max_seq_length=3", "--use_native=False"], {}, "--max_seq_length=3 is too small"),
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


def test_a_pool_whose_work_is_done_lets_its_workers_exit_instead_of_killing_them(tmp_path):
    """`finish_pool`: each worker ends by itself (status 0), not by `Pool.terminate`'s SIGTERM,
    which can wait forever on a lock a killed worker held. (In a fresh process: forking this one,
    which runs TensorFlow's threads, could itself deadlock.)"""
    import sys
    script = (
        "import sys\n"
        "from bert_realformer.pretraining import documents as docs\n"
        f"pool = docs.worker_pool(({VOCAB_EN!r}, True, None), 2)\n"
        "workers = list(pool._pool)\n"
        "pool.terminate = lambda: sys.exit('Pool.terminate called')\n"
        f"lines = [ids for ids in docs.tokenized_lines([{INPUT!r}], pool) if ids is not docs.BLANK]\n"
        "docs.finish_pool(pool)\n"
        "print(len(lines), [worker.exitcode for worker in workers])\n")
    result = script_processes.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    expected_lines = sum(1 for line in open(INPUT, encoding="utf-8") if line.strip())
    assert result.stdout.split() == [str(expected_lines), "[0,", "0]"]
