"""Classifier processors on files in the published formats, features, and bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.inference.export import pack_inputs
from bert_realformer.tasks.classification.features import cached_features, convert_example
from bert_realformer.tasks.classification.processors import get_processor
from bert_realformer.tasks.classification.reading import InputExample
from bert_realformer.tasks.sequences import TRUNCATIONS, kept, pack, truncate_seq_pair
from tokenization import FullTokenizer

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
VOCAB_EN = os.path.join(DATA, "tokenization", "vocab_en_uncased.txt")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_glue_formats(tmp_path):
    write(tmp_path / "cola" / "train.tsv", "gj04\t1\t\tThe sailors rode the breeze.\nsrc\t0\t*\tThe more books.\n")
    write(tmp_path / "cola" / "test.tsv", "index\tsentence\n0\tBill whistled.\n")
    cola = get_processor("cola")
    train = cola.get_train_examples(str(tmp_path / "cola"))
    assert [(e.text_a, e.label) for e in train] == [("The sailors rode the breeze.", "1"), ("The more books.", "0")]
    assert cola.get_test_examples(str(tmp_path / "cola"))[0].text_a == "Bill whistled."

    write(tmp_path / "mrpc" / "dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said.\tHe says.\n")
    (e,) = get_processor("mrpc").get_dev_examples(str(tmp_path / "mrpc"))
    assert (e.text_a, e.text_b, e.label) == ("He said.", "He says.", "1")

    header = "\t".join(["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p",
                        "sentence1", "sentence2", "label1", "gold_label"])
    write(tmp_path / "mnli" / "dev_mismatched.tsv", header + "\n" + "\t".join(
        ["0", "1", "2", "g", "b", "b", "p", "p", "A man.", "A person.", "entailment", "entailment"]) + "\n")
    (e,) = get_processor("mnli", mismatched=True).get_dev_examples(str(tmp_path / "mnli"))
    assert (e.text_a, e.text_b, e.label) == ("A man.", "A person.", "entailment")

    sts_header = "\t".join(["index", "genre", "filename", "year", "old_index", "source1", "source2",
                            "sentence1", "sentence2", "score"])
    write(tmp_path / "sts" / "train.tsv", sts_header + "\n" + "\t".join(
        ["0", "g", "f", "y", "0", "s", "s", "A plane.", "An air plane.", "5.000"]) + "\n")
    sts = get_processor("sts-b")
    assert sts.get_labels() is None
    assert sts.get_train_examples(str(tmp_path / "sts"))[0].label == "5.000"


def test_xnli_any_language(tmp_path):
    write(tmp_path / "multinli" / "multinli.train.de.tsv", "premise\thypo\tlabel\nEin Mann.\tJemand.\tcontradictory\n")
    cols = ["language", "gold_label"] + ["x"] * 4 + ["sentence1", "sentence2"]
    write(tmp_path / "xnli.dev.tsv", "\t".join(cols) + "\n" + "\t".join(
        ["de", "neutral", "", "", "", "", "Hallo.", "Welt."]) + "\n" + "\t".join(
        ["zh", "neutral", "", "", "", "", "你好。", "世界。"]) + "\n")
    xnli = get_processor("xnli", language="de")
    assert xnli.get_train_examples(str(tmp_path))[0].label == "contradiction"
    assert [e.text_a for e in xnli.get_dev_examples(str(tmp_path))] == ["Hallo."]


def test_clue_formats(tmp_path):
    write(tmp_path / "tnews" / "train.json", json.dumps(
        {"label": "102", "label_desc": "news_entertainment", "sentence": "江疏影甜甜圈自拍", "keywords": ""}) + "\n")
    (e,) = get_processor("tnews").get_train_examples(str(tmp_path / "tnews"))
    assert (e.text_a, e.label) == ("江疏影甜甜圈自拍", "102")
    assert len(get_processor("tnews").get_labels()) == 15 and len(get_processor("iflytek").get_labels()) == 119
    write(tmp_path / "csl" / "dev.json", json.dumps(
        {"id": 1, "abst": "摘要", "keyword": ["水声", "通信"], "label": "1"}) + "\n")
    (e,) = get_processor("csl").get_dev_examples(str(tmp_path / "csl"))
    assert (e.text_a, e.text_b, e.label) == ("水声 通信", "摘要", "1")
    write(tmp_path / "ocnli" / "dev.json", "\n".join(json.dumps(r) for r in [
        {"sentence1": "a", "sentence2": "b", "label": "neutral"},
        {"sentence1": "c", "sentence2": "d", "label": "-"}]) + "\n")
    assert len(get_processor("ocnli").get_dev_examples(str(tmp_path / "ocnli"))) == 1


def test_generic_and_thucnews(tmp_path):
    write(tmp_path / "g" / "train.csv", "title,body,topic\nHi,there,b\n\"A, B\",c,a\n")
    generic = get_processor("generic", str(tmp_path / "g"), data_format="csv", text_a_column="title",
                            text_b_column="body", label_column="topic")
    assert generic.get_labels() == ["a", "b"]
    assert generic.get_train_examples(str(tmp_path / "g"))[1].text_a == "A, B"
    write(tmp_path / "t" / "cnews.train.txt", "体育\t比赛\n财经\t股票\n体育\t足球\n")
    thuc = get_processor("thucnews", str(tmp_path / "t"))
    assert thuc.get_labels() == ["体育", "财经"]


def test_integer_labels_sort_as_integers_and_the_order_is_recorded(tmp_path):
    """Generic labels 0..11 from data: "2" before "10" (as strings "10" came third). The run
    writes the order to OUTPUT_DIR/label_list.txt; a later run keeps the recorded order (the
    classifier's output columns) and refuses another set of labels."""
    from bert_realformer.tasks.classification.task import settle_label_list
    rows = "".join(f"text {i}\t{i % 12}\n" for i in range(24))
    write(tmp_path / "data" / "train.tsv", "text\tlabel\n" + rows)
    labels = get_processor("generic", str(tmp_path / "data")).get_labels()
    assert labels == [str(i) for i in range(12)]
    assert get_processor("generic", str(tmp_path / "data"), label_column="text").get_labels()[:3] == [
        "text 0", "text 1", "text 10"]  # not all integers: as strings
    out = tmp_path / "out"
    out.mkdir()
    assert settle_label_list(labels, str(out)) == labels
    assert (out / "label_list.txt").read_text() == "".join(f"{i}\n" for i in range(12))
    assert settle_label_list(sorted(labels), str(out)) == labels  # string order given: recorded order kept
    with pytest.raises(InputError, match=r"^the labels of this run \(a, b\) are not those the model in "):
        settle_label_list(["a", "b"], str(out))


def test_a_generic_header_without_the_column_names_it(tmp_path):
    write(tmp_path / "train.tsv", "sentence\tlabel\nhello\t1\n")
    with pytest.raises(InputError) as info:
        get_processor("generic", str(tmp_path))
    assert str(info.value) == (f"no column 'text' in the header of {tmp_path / 'train.tsv'} (columns: sentence, "
                               "label); the first line names the columns (see --text_a_column)")
    write(tmp_path / "test.tsv", "sentence\nhello\n")  # test files need no label column
    processor = get_processor("generic", str(tmp_path), text_a_column="sentence")
    assert [e.text_a for e in processor.get_test_examples(str(tmp_path))] == ["hello"]


def test_test_labels_outside_the_label_list_are_not_an_error(tmp_path, caplog):
    """THUCNews-style test files carry labels; one the training split lacks is not used, so it
    stands in as the first label and the features convert (it was a KeyError)."""
    write(tmp_path / "cnews.train.txt", "体育\t比赛\n财经\t股票\n")
    write(tmp_path / "cnews.test.txt", "体育\t足球\n家居\t沙发\n")
    thuc = get_processor("thucnews", str(tmp_path))
    labels = thuc.set_labels_from(str(tmp_path))
    with caplog.at_level("INFO"):
        test = thuc.get_test_examples(str(tmp_path))
    assert [e.label for e in test] == ["体育", "体育"]
    assert "1 test labels are not in the label list" in caplog.text
    tokenizer = FullTokenizer(VOCAB_EN, do_lower_case=True)
    label_map = {label: i for i, label in enumerate(labels)}
    assert [convert_example(e, label_map, 16, tokenizer)["label_id"] for e in test] == [0, 0]
    write(tmp_path / "cnews.val.txt", "家居\t沙发\n")
    with pytest.raises(InputError, match=r"cnews.val.txt:1: unknown label '家居'"):
        thuc.get_dev_examples(str(tmp_path))


@pytest.mark.parametrize("name,content,kwargs,line", [
    ("train.tsv", b"sentence\tlabel\nok\t1\nbad \xff byte\t0\n", {"name": "sst-2"}, 3),
    ("cnews.train.txt", b"a\tb\n\xe4\xbd\tc\n", {"name": "thucnews"}, 2),
    ("train.jsonl", b'{"s": "ok", "l": "a"}\n{"s": "\xc3(", "l": "b"}\n',
     {"name": "generic", "data_format": "jsonl", "text_a_column": "s", "label_column": "l"}, 2),
])
def test_text_that_is_not_utf8_is_one_error_naming_file_and_line(tmp_path, name, content, kwargs, line):
    (tmp_path / name).write_bytes(content)
    options = {k: v for k, v in kwargs.items() if k != "name"}
    with pytest.raises(InputError) as info:  # labels are read from the training file, or the examples
        get_processor(kwargs["name"], str(tmp_path), **options).get_train_examples(str(tmp_path))
    assert str(info.value).startswith(f"{tmp_path / name}:{line}: not UTF-8 (")


@pytest.mark.parametrize("make,call,message", [
    (lambda p: None, lambda p: get_processor("glue-x"), "unknown task; known tasks: afqmc, cmnli, cola"),
    (lambda p: None, lambda p: get_processor("sst-2").get_train_examples(str(p)), "train.tsv: no such file"),
    (lambda p: write(p / "train.tsv", "sentence\tlabel\nok\t1\nbad row\n"),
     lambda p: get_processor("sst2").get_train_examples(str(p)),
     "train.tsv:3: expected 2 tab-separated columns, found 1"),
    (lambda p: write(p / "train.tsv", "sentence\tlabel\nok\t7\n"),
     lambda p: get_processor("sst-2").get_train_examples(str(p)),
     "train.tsv:2: unknown label '7'; expected one of 0, 1"),
    (lambda p: write(p / "train.tsv", "sentence\tlabel\n"),
     lambda p: get_processor("sst-2").get_train_examples(str(p)), "the train split has no examples"),
    (lambda p: write(p / "train.json", "{not json\n"),
     lambda p: get_processor("afqmc").get_train_examples(str(p)), "train.json:1: not valid JSON"),
])
def test_bad_input_names_file_and_line(tmp_path, make, call, message):
    make(tmp_path)
    with pytest.raises(InputError) as info:
        call(tmp_path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_features_truncate_like_the_original_and_cache(tmp_path):
    a, b = list(range(10)), list(range(3))
    truncate_seq_pair(a, b, 8)
    assert (len(a), len(b)) == (5, 3)
    tokenizer = FullTokenizer(VOCAB_EN)
    # A has 5 tokens, B 4, room 10 - 3 = 7: A loses its last two (A is longer, then ties go to B).
    example = InputExample("x", "the quick brown fox jumps", "over the lazy dog", "1", "f:1")
    f = convert_example(example, {"0": 0, "1": 1}, 10, tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(f["input_ids"])
    assert tokens == ["[CLS]", "the", "quick", "brown", "fox", "[SEP]", "over", "the", "lazy", "[SEP]"]
    assert f["segment_ids"] == [0] * 6 + [1] * 4 and f["label_id"] == 1
    # The cache is re-used for the same inputs and rebuilt when a flag changes.
    data = tmp_path / "train.tsv"
    data.write_text("x")
    examples = [InputExample("a", "hello world", None, "1", f"{data}:1")]
    path = str(tmp_path / "train.tf_record")
    assert cached_features(examples, ["0", "1"], 16, tokenizer, path) is False
    assert cached_features(examples, ["0", "1"], 16, tokenizer, path) is True
    assert cached_features(examples, ["0", "1"], 32, tokenizer, path) is False


def test_a_damaged_feature_cache_is_written_again_with_one_warning(tmp_path, caplog):
    tokenizer = FullTokenizer(VOCAB_EN)
    examples = [InputExample(str(i), f"hello world {i}", None, "1", f"f:{i}") for i in range(5)]
    path = tmp_path / "eval.tf_record"
    assert cached_features(examples, ["0", "1"], 16, tokenizer, str(path)) is False
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])  # the last record cut short
    with caplog.at_level("WARNING"):
        assert cached_features(examples, ["0", "1"], 16, tokenizer, str(path)) is False
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"{path}: truncated record at offset ")
    assert said[0].endswith("; writing the feature cache again")
    assert path.read_bytes() == whole


def test_feature_cache_follows_the_options_that_change_the_examples(tmp_path):
    """Same files, same count, same labels: switching --xnli_language or the generic task's column
    must rebuild the cache, not re-use the other option's features."""
    cols = ["language", "gold_label"] + ["x"] * 4 + ["sentence1", "sentence2"]
    write(tmp_path / "xnli.dev.tsv", "\t".join(cols) + "\n" + "\t".join(
        ["en", "neutral", "", "", "", "", "hello world", "the dog"]) + "\n" + "\t".join(
        ["fr", "neutral", "", "", "", "", "bonjour", "le chien"]) + "\n")
    write(tmp_path / "g" / "train.csv", "title,body,topic\nhello world,the dog,a\n")
    tokenizer = FullTokenizer(VOCAB_EN)
    path = str(tmp_path / "dev.tf_record")

    def first_ids(examples, labels):
        cached_features(examples, labels, 16, tokenizer, path)
        record = next(iter(tf.data.TFRecordDataset(path)))
        return tf.train.Example.FromString(record.numpy()).features.feature["input_ids"].int64_list.value[:4]

    labels = get_processor("xnli").get_labels()
    english = first_ids(get_processor("xnli", language="en").get_dev_examples(str(tmp_path)), labels)
    french = first_ids(get_processor("xnli", language="fr").get_dev_examples(str(tmp_path)), labels)
    assert english != french
    assert list(french) == tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize("bonjour le")[:3])
    by_title, by_body = (first_ids(get_processor("generic", str(tmp_path / "g"), data_format="csv",
                                                 text_a_column=column, label_column="topic")
                                   .get_train_examples(str(tmp_path / "g")), ["a"]) for column in ("title", "body"))
    assert list(by_title) == tokenizer.convert_tokens_to_ids(["[CLS]", "hello", "world", "[SEP]"])
    assert list(by_body) == tokenizer.convert_tokens_to_ids(["[CLS]", "the", "dog", "[SEP]"])


@pytest.mark.parametrize("truncation", TRUNCATIONS)
def test_in_graph_packing_equals_python_features(truncation):
    """The SavedModel's truncation and packing give the Python path's features, single texts
    and pairs, for every truncation."""
    tokenizer = FullTokenizer(VOCAB_EN)
    rng = np.random.RandomState(0)
    words = "the of and to in a is that for it as was with be by on not he".split()
    texts = [" ".join(rng.choice(words, rng.randint(0, 14))) or "a" for _ in range(40)]
    for max_len in (8, 11, 16):
        pairs = list(zip(texts[:20], texts[20:]))
        for single in (False, True):
            expected = [convert_example(InputExample("g", a, None if single else b, "0"), {"0": 0}, max_len,
                                        tokenizer, truncation) for a, b in pairs]
            ids_a = tf.ragged.constant([tokenizer.tokenize_to_ids(a) for a, _ in pairs], dtype=tf.int64)
            ids_b = None if single else tf.ragged.constant([tokenizer.tokenize_to_ids(b) for _, b in pairs],
                                                           dtype=tf.int64)
            packed = pack_inputs(ids_a, ids_b, max_len, tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"],
                                 truncation)
            padded = [f["input_ids"][:packed["input_ids"].shape[1]] for f in expected]
            assert packed["input_ids"].numpy().tolist() == padded
            assert packed["token_type_ids"].numpy().tolist() == [f["segment_ids"][:len(p)]
                                                                 for f, p in zip(expected, padded)]
            assert packed["input_mask"].numpy().tolist() == [f["input_mask"][:len(p)]
                                                             for f, p in zip(expected, padded)]


def test_truncations_by_hand():
    """Cut to 8: head keeps 0-7; tail 12-19; head_tail the first 8 // 4 = 2 and the last 6. A
    pair keeps the original's lengths (pop from the longer) and the truncation's tokens."""
    text = list(range(20))
    assert kept(text, 8, "head") == list(range(8))
    assert kept(text, 8, "tail") == list(range(12, 20))
    assert kept(text, 8, "head_tail") == [0, 1, 14, 15, 16, 17, 18, 19]
    assert kept(text[:5], 8, "tail") == text[:5]  # what fits is whole
    a, b = list(range(10)), list(range(100, 104))  # [CLS] A [SEP] B [SEP] in 12: room 9 -> A 5, B 4
    assert pack(a, b, 12, "C", "S", "tail")[0] == ["C", 5, 6, 7, 8, 9, "S", 100, 101, 102, 103, "S"]
    assert pack(a, b, 12, "C", "S", "head_tail")[0] == ["C", 0, 6, 7, 8, 9, "S", 100, 101, 102, 103, "S"]
    assert pack(a, b, 12, "C", "S")[0] == ["C", 0, 1, 2, 3, 4, "S", 100, 101, 102, 103, "S"]
    # RoBERTa's pair, two separators between the texts: room 8 -> A 4, B 4; B's segment from its first token.
    sequence, segments = pack(a, b, 12, "C", "S", between=["S", "S"])
    assert sequence == ["C", 0, 1, 2, 3, "S", "S", 100, 101, 102, 103, "S"]
    assert segments == [0] * 7 + [1] * 5


def test_labels_with_surrounding_spaces_are_one_class_and_said_once(tmp_path, caplog):
    write(tmp_path / "g" / "train.tsv", "text\tlabel\na\t1 \nb\t1\nc\t0\nd\t 0\ne\t1 \n")
    processor = get_processor("generic", str(tmp_path / "g"))
    with caplog.at_level("WARNING"):
        assert processor.get_labels() == ["0", "1"]
        assert [e.label for e in processor.get_train_examples(str(tmp_path / "g"))] == ["1", "1", "0", "0", "1"]
    said = [r.getMessage() for r in caplog.records if "surrounding whitespace" in r.getMessage()]
    assert said == [f"{tmp_path}/g/train.tsv:2: label '1 ' has surrounding whitespace; labels are read without it"]
    write(tmp_path / "t" / "train.tsv", "sports \tgoal\nsports\tmatch\n")
    assert get_processor("thucnews", str(tmp_path / "t")).get_labels() == ["sports"]


@pytest.mark.parametrize("task,files,where", [
    ("thucnews", {"train.tsv": "sports\tgoal\n\tmatch\n"}, "train.tsv:2"),
    ("thucnews", {"train.tsv": "sports\tgoal\n", "dev.tsv": "   \tmatch\n"}, "dev.tsv:1"),
    ("generic", {"train.tsv": "text\tlabel\na\t1\nb\t\n"}, "train.tsv:3"),
    ("generic", {"train.tsv": "text\tlabel\na\t1\n", "dev.tsv": "text\tlabel\nb\t  \n"}, "dev.tsv:2"),
], ids=["thucnews-train", "thucnews-dev-spaces", "generic-train", "generic-dev-spaces"])
def test_an_empty_label_in_a_training_or_dev_file_is_refused_naming_its_line(tmp_path, task, files, where):
    for name, text in files.items():
        write(tmp_path / name, text)
    with pytest.raises(InputError) as refused:
        processor = get_processor(task, str(tmp_path))
        processor.get_labels()
        processor.get_dev_examples(str(tmp_path))
    assert str(refused.value) == f"{tmp_path}/{where}: empty label (every training and dev example needs one)"


def test_an_unlabelled_test_example_is_not_a_class_and_unicode_labels_round_trip(tmp_path):
    from bert_realformer.tasks.classification.task import recorded_label_list, settle_label_list
    write(tmp_path / "train.tsv", "text\tlabel\na\t体育 新闻\nb\tcafé\nc\t😀\n")
    write(tmp_path / "test.tsv", "text\tlabel\nd\t\n")
    processor = get_processor("generic", str(tmp_path))
    labels = processor.get_labels()
    assert labels == sorted(["体育 新闻", "café", "😀"])
    assert len(processor.get_test_examples(str(tmp_path))) == 1  # its blank label: no class
    out = str(tmp_path / "out")
    os.makedirs(out)
    assert settle_label_list(labels, out) == labels
    assert recorded_label_list(out) == labels  # exactly, in order


def test_a_field_longer_than_the_csv_default_limit_is_read(tmp_path):
    """A long document in one TSV field (csv refuses fields over 131,072 characters by default)."""
    text = "长" * 200_000
    write(tmp_path / "train.tsv", f"text\tlabel\n{text}\t1\nshort\t0\n")
    examples = get_processor("generic", str(tmp_path)).get_train_examples(str(tmp_path))
    assert [(len(e.text_a), e.label) for e in examples] == [(200_000, "1"), (5, "0")]


def test_a_header_with_a_byte_order_mark_names_its_first_column(tmp_path):
    (tmp_path / "train.csv").write_bytes("\ufefftext,label\nhello,1\n".encode())
    examples = get_processor("generic", str(tmp_path), data_format="csv").get_train_examples(str(tmp_path))
    assert [(e.text_a, e.label) for e in examples] == [("hello", "1")]


def test_a_lone_surrogate_from_scraped_json_is_dropped_as_the_tokenizer_drops_it(tmp_path):
    write(tmp_path / "train.jsonl", '{"text": "good abc\\ud83d", "label": "1"}\n{"text": "bad", "label": "0"}\n')
    processor = get_processor("generic", str(tmp_path), data_format="jsonl")
    examples = processor.get_train_examples(str(tmp_path))
    assert examples[0].text_a == "good abc"  # the half emoji dropped, the word kept
    tokenizer = FullTokenizer(VOCAB_EN)
    # Text that reaches the features cache with one (a SQuAD question) is hashed, not a crash;
    # the tokenizer makes its word [UNK], as the original's does.
    from bert_realformer.tasks.feature_cache import digest
    assert digest([["abc\ud83d"]]) != digest([["abc"]])
    assert tokenizer.tokenize("good abc\ud83d") == ["good", "[UNK]"]
    path = str(tmp_path / "train.tf_record")
    assert cached_features(examples, ["0", "1"], 16, tokenizer, path) is False
    record = next(iter(tf.data.TFRecordDataset(path))).numpy()
    ids = tf.train.Example.FromString(record).features.feature["input_ids"].int64_list.value
    assert list(ids[:4]) == tokenizer.convert_tokens_to_ids(["[CLS]", "good", "abc", "[SEP]"])
