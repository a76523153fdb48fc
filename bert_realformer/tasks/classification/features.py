"""Examples -> fixed-length features, cached as TFRecord like the original run_classifier.

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated as the original (tokens dropped from the
end of the longer text), zero padded; with `doc_stride`, a text A too long for one sequence
becomes several overlapping windows instead (`sequences.pack_windows`), each a record of its
example. Record features: `input_ids`, `input_mask`, `segment_ids` (int64 x max_seq_length),
`label_ids` (int64, or float for regression), `is_real_example` (int64), `example_index` (int64:
the example a window belongs to). A cache file is re-used only when its key (a digest of the
examples as read, the vocabulary's contents, casing, length, stride, labels: `_cache_key`)
matches; otherwise it is rebuilt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bert_realformer.tasks.feature_cache import cached_records, digest, file_digest
from bert_realformer.tasks.sequences import pack, pack_windows
from bert_realformer.tfrecords import encode_example, float_feature, int64_feature
from bert_realformer.training.padding import trim_to_longest

if TYPE_CHECKING:  # annotations only
    import tensorflow as tf

    from bert_realformer.tasks.classification.reading import InputExample
    from tokenization import FullTokenizer


def convert_example(example, label_map, max_seq_length, tokenizer):
    """-> {input_ids, input_mask, segment_ids, label_id} (lists; label_id int or float), the
    original's one truncated sequence."""
    return convert_windows(example, label_map, max_seq_length, tokenizer)[0]


def convert_windows(example, label_map, max_seq_length, tokenizer, doc_stride=None):
    """-> [{input_ids, input_mask, segment_ids, label_id}]: `convert_example`'s one sequence,
    or with `doc_stride` the windows of a long text A."""
    ids_a = tokenizer.tokenize_to_ids(example.text_a)
    ids_b = tokenizer.tokenize_to_ids(example.text_b) if example.text_b else None
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    if doc_stride:
        windows = pack_windows(ids_a, ids_b, max_seq_length, doc_stride, cls, sep)
    else:
        windows = [pack(ids_a, ids_b, max_seq_length, cls, sep)]
    label = float(example.label) if label_map is None else label_map[example.label]
    features = []
    for input_ids, segment_ids in windows:
        n = len(input_ids)
        pad = [0] * (max_seq_length - n)
        features.append({"input_ids": input_ids + pad, "input_mask": [1] * n + pad,
                         "segment_ids": segment_ids + pad, "label_id": label})
    return features


def feature_spec(max_seq_length, regression=False):
    import tensorflow as tf
    return {"input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64),
            "example_index": tf.io.FixedLenFeature([], tf.int64)}


def _cache_key(examples, label_list, max_seq_length, tokenizer, doc_stride):
    """Everything the features depend on: the examples themselves (so any option that changes
    what is read -- the XNLI language, MNLI mismatched, the generic format's columns -- changes the
    key), the vocabulary's contents, casing, length, stride and labels."""
    return {"examples": digest([e.text_a, e.text_b, e.label] for e in examples),
            "vocab": file_digest(tokenizer.vocab_file), "do_lower_case": tokenizer.do_lower_case,
            "max_seq_length": max_seq_length, "labels": label_list, "doc_stride": doc_stride, "layout": 2}


def cached_features(examples: list[InputExample], label_list: list[str] | None, max_seq_length: int,
                    tokenizer: FullTokenizer, path: str, doc_stride: int | None = None,
                    sort_by_length: bool = False) -> bool:
    """Writes `path` (and `path.key`) unless a cache with the same key exists. Returns True
    when the cache was re-used. Its records (windows with `doc_stride`, else one per example)
    are counted by `feature_cache.record_count(path)`. `sort_by_length` (evaluation and
    prediction): the records in order of length (stable), so that a batch cut to its longest
    sequence holds little padding; `example_index` still names each record's example."""
    label_map = None if label_list is None else {label: i for i, label in enumerate(label_list)}

    def features():
        for index, example in enumerate(examples):
            for f in convert_windows(example, label_map, max_seq_length, tokenizer, doc_stride):
                yield index, f

    def records():
        ordered = sorted(features(), key=lambda item: sum(item[1]["input_mask"])) if sort_by_length else features()
        for index, f in ordered:
            label = float_feature([f["label_id"]]) if label_map is None else int64_feature([f["label_id"]])
            yield encode_example({
                "input_ids": int64_feature(f["input_ids"]), "input_mask": int64_feature(f["input_mask"]),
                "segment_ids": int64_feature(f["segment_ids"]), "label_ids": label,
                "is_real_example": int64_feature([1]), "example_index": int64_feature([index])})

    key = {**_cache_key(examples, label_list, max_seq_length, tokenizer, doc_stride), "sorted": sort_by_length}
    reused, _ = cached_records(path, key, records)
    return reused


def make_dataset(path: str, batch_size: int, max_seq_length: int, is_training: bool, regression: bool = False,
                 seed: int | None = None, start_batch: int = 0, num_examples: int | None = None,
                 shuffle_buffer_size: int = 0, group_by_length: bool = False,
                 dynamic_padding: bool = True) -> tf.data.Dataset:
    """Training: the `num_examples` records in a new permutation every epoch (or the original's
    100-record buffer, `shuffle_buffer_size`), repeated, remainder dropped, from batch
    `start_batch` on; fixed shapes unless `group_by_length` (batches of similar lengths, each
    cut to its longest). Eval/predict: in order, the last batch kept, each batch cut to its
    longest sequence (`dynamic_padding`; False: every batch at `max_seq_length`)."""
    import tensorflow as tf

    from bert_realformer.training.per_example import training_batches
    spec = feature_spec(max_seq_length, regression)

    def cast(example):
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}

    d = tf.data.TFRecordDataset(path)
    if is_training and group_by_length:
        d = d.map(lambda record: cast(tf.io.parse_single_example(record, spec)), num_parallel_calls=tf.data.AUTOTUNE)
        d = training_batches(d, batch_size, seed, start_batch, num_examples, shuffle_buffer_size, group_by_length=True)
        return d.prefetch(tf.data.AUTOTUNE)
    if is_training:
        d = training_batches(d, batch_size, seed, start_batch, num_examples, shuffle_buffer_size)
    else:
        d = d.batch(batch_size)

    def decode(records):
        example = cast(tf.io.parse_example(records, spec))
        return trim_to_longest(example) if dynamic_padding and not is_training else example
    return d.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
