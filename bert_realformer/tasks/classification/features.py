"""Examples -> fixed-length features, cached as TFRecord like the original run_classifier.

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated as the original (tokens dropped from the
end of the longer text), zero padded; with `doc_stride`, a text A too long for one sequence
becomes several overlapping windows instead (`sequences.pack_windows`), each a record of its
example. Record features: `input_ids`, `input_mask`, `segment_ids` (int64 x max_seq_length),
`label_ids` (int64; float for regression; [C] int64 0/1 for a multi-label example, whose label is
a tuple of labels), `is_real_example` (int64), `example_index` (int64:
the example a window belongs to), `window_index` (int64: the window's place in its example, 0 for
the first). A cache file is re-used only when its key (a digest of the
examples as read, the vocabulary's contents, casing, length, stride, labels: `_cache_key`)
matches; otherwise it is rebuilt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from bert_realformer.inference.padding import trim_to_longest
from bert_realformer.storage import file_digest
from bert_realformer.tasks.feature_cache import cached_records, digest
from bert_realformer.tasks.sequences import markers, pack, pack_windows
from bert_realformer.tfrecords import encode_example, float_feature, int64_feature

if TYPE_CHECKING:  # annotations only
    import tensorflow as tf

    from bert_realformer.finetuning.schedule import Schedule
    from bert_realformer.tasks.classification.reading import InputExample
    from tokenization import FullTokenizer


def convert_example(example, label_map, max_seq_length, tokenizer, truncation="head"):
    """-> {input_ids, input_mask, segment_ids, label_id} (lists; label_id int or float), the
    original's one truncated sequence (keeping the tokens `truncation` says)."""
    return convert_windows(example, label_map, max_seq_length, tokenizer, truncation=truncation)[0]


def convert_windows(example, label_map, max_seq_length, tokenizer, doc_stride=None, truncation="head"):
    """-> [{input_ids, input_mask, segment_ids, label_id}]: `convert_example`'s one sequence,
    or with `doc_stride` the windows of a long text A."""
    ids_a = tokenizer.tokenize_to_ids(example.text_a)
    ids_b = tokenizer.tokenize_to_ids(example.text_b) if example.text_b else None
    marks = markers(tokenizer)
    if doc_stride:
        windows = pack_windows(ids_a, ids_b, max_seq_length, doc_stride, **marks)
    else:
        windows = [pack(ids_a, ids_b, max_seq_length, truncation=truncation, **marks)]
    label = _label_value(example.label, label_map)
    features = []
    for input_ids, segment_ids in windows:
        n = len(input_ids)
        pad = [0] * (max_seq_length - n)
        features.append({"input_ids": input_ids + pad, "input_mask": [1] * n + pad,
                         "segment_ids": segment_ids + pad, "label_id": label})
    return features


def _label_value(label, label_map):
    """A record's label: the score (regression, `label_map` None), the label's index, or for a
    multi-label example (a tuple of labels) the multi-hot [C] list."""
    if label_map is None:
        return float(label)
    if isinstance(label, tuple):
        hot = [0] * len(label_map)
        for name in label:
            hot[label_map[name]] = 1
        return hot
    return label_map[label]


def feature_spec(max_seq_length, regression=False, multi_hot=None):
    """The records' features; `multi_hot`: C, the width of multi-label examples' labels."""
    import tensorflow as tf
    label_shape = [multi_hot] if multi_hot else []
    return {"input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "label_ids": tf.io.FixedLenFeature(label_shape, tf.float32 if regression else tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64),
            "example_index": tf.io.FixedLenFeature([], tf.int64),
            "window_index": tf.io.FixedLenFeature([], tf.int64)}


def _cache_key(examples, label_list, max_seq_length, tokenizer, doc_stride, truncation):
    """Everything the features depend on: the examples themselves (so any option that changes
    what is read -- the XNLI language, MNLI mismatched, the generic format's columns -- changes the
    key), the vocabulary's contents, casing, length, stride, truncation and labels."""
    return {"examples": digest([e.text_a, e.text_b, e.label] for e in examples),
            "vocab": file_digest(tokenizer.vocab_file), "do_lower_case": tokenizer.do_lower_case,
            "max_seq_length": max_seq_length, "labels": label_list, "doc_stride": doc_stride,
            "truncation": None if doc_stride else truncation, "layout": 3}


def features_key(examples: list[InputExample], label_list: list[str] | None, max_seq_length: int,
                 tokenizer: FullTokenizer, doc_stride: int | None = None, sort_by_length: bool = False,
                 per_document: bool = False, truncation: str = "head") -> dict:
    """The key of the cache `cached_features` writes for these arguments (see `_cache_key`)."""
    return {**_cache_key(examples, label_list, max_seq_length, tokenizer, doc_stride, truncation),
            "sorted": sort_by_length, **({"per_document": True} if per_document else {})}


def cached_features(examples: list[InputExample], label_list: list[str] | None, max_seq_length: int,
                    tokenizer: FullTokenizer, path: str, doc_stride: int | None = None,
                    sort_by_length: bool = False, per_document: bool = False, truncation: str = "head",
                    key: dict | None = None) -> bool:
    """Writes `path` (and `path.key`) unless a cache with the same key exists. Returns True
    when the cache was re-used. Its records (windows with `doc_stride`, else one per example)
    are counted by `feature_cache.record_count(path)`. `sort_by_length` (evaluation and
    prediction): the records in order of length (stable), so that a batch cut to its longest
    sequence holds little padding; `example_index` still names each record's example.
    `per_document` (training on whole documents): one record per example holding all its windows,
    the token features [num_windows * max_seq_length] with `num_windows`."""
    label_map = None if label_list is None else {label: i for i, label in enumerate(label_list)}

    def features():
        for index, example in enumerate(examples):
            windows = convert_windows(example, label_map, max_seq_length, tokenizer, doc_stride, truncation)
            if per_document:
                yield index, {**{name: [v for w in windows for v in w[name]] for name in _TOKEN_FEATURES},
                              "label_id": windows[0]["label_id"], "num_windows": len(windows)}
            else:
                for position, f in enumerate(windows):
                    yield index, {**f, "window_index": position}

    def records():
        ordered = sorted(features(), key=lambda item: sum(item[1]["input_mask"])) if sort_by_length else features()
        for index, f in ordered:
            value = f["label_id"] if isinstance(f["label_id"], list) else [f["label_id"]]
            label = float_feature(value) if label_map is None else int64_feature(value)
            record = {name: int64_feature(f[name]) for name in _TOKEN_FEATURES}
            record.update({"label_ids": label, "is_real_example": int64_feature([1]),
                           "example_index": int64_feature([index])})
            if per_document:
                record["num_windows"] = int64_feature([f["num_windows"]])
            else:
                record["window_index"] = int64_feature([f["window_index"]])
            yield encode_example(record)

    if key is None:  # (else the caller's, who named the file by it: `features_key` of these arguments)
        key = features_key(examples, label_list, max_seq_length, tokenizer, doc_stride, sort_by_length,
                           per_document, truncation)
    reused, _ = cached_records(path, key, records)
    return reused


_TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class RecordLayout:
    """What a feature file's records hold (`feature_spec`): sequences of `max_seq_length`, float
    labels for `regression`, and `multi_hot`: C, the width of multi-label examples' labels."""
    max_seq_length: int
    regression: bool = False
    multi_hot: int | None = None

    def spec(self) -> dict:
        return feature_spec(self.max_seq_length, self.regression, self.multi_hot)


def _cast(example: dict) -> dict:
    import tensorflow as tf
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}


def training_dataset(path: str, layout: RecordLayout, schedule: Schedule, start_batch: int = 0,
                     num_examples: int | None = None, group_by_length: bool = False) -> tf.data.Dataset:
    """The `num_examples` records in batches of the schedule's size, in a new permutation every
    epoch from its seed (or the original's 100-record buffer, its `shuffle_buffer_size`),
    repeated, remainder dropped, from batch `start_batch` on; fixed shapes unless
    `group_by_length` (batches of similar lengths, each cut to its longest)."""
    import tensorflow as tf

    from bert_realformer.finetuning.schedule import training_batches
    spec, d = layout.spec(), tf.data.TFRecordDataset(path)
    order = (schedule.batch_size, schedule.seed, start_batch, num_examples, schedule.shuffle_buffer_size)
    if group_by_length:
        d = d.map(lambda record: _cast(tf.io.parse_single_example(record, spec)), num_parallel_calls=tf.data.AUTOTUNE)
        return training_batches(d, *order, group_by_length=True).prefetch(tf.data.AUTOTUNE)
    d = training_batches(d, *order)
    return d.map(lambda records: _cast(tf.io.parse_example(records, spec)),
                 num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def prediction_dataset(path: str, layout: RecordLayout, batch_size: int,
                       trim: Callable[[dict], dict] | None = trim_to_longest) -> tf.data.Dataset:
    """The records in order, the last batch kept, each batch cut by `trim` (the driver's `trim`
    for its prediction: to the batch's longest sequence or its length bucket; None: every batch
    at `max_seq_length`, as the original)."""
    import tensorflow as tf
    spec = layout.spec()

    def decode(records):
        example = _cast(tf.io.parse_example(records, spec))
        return example if trim is None else trim(example)
    return tf.data.TFRecordDataset(path).batch(batch_size).map(decode, num_parallel_calls=tf.data.AUTOTUNE) \
        .prefetch(tf.data.AUTOTUNE)


def document_dataset(path: str, batch_size: int, max_seq_length: int, max_windows: int, regression: bool = False,
                     seed: int = 0, start_batch: int = 0, num_documents: int | None = None,
                     shuffle_buffer_size: int = 0) -> tf.data.Dataset:
    """Training batches of whole documents from a `per_document` cache: the documents in the
    training order (`per_example.training_order`), from batch `start_batch` on, each batch
    {input_ids, input_mask, segment_ids: [B, W, max_seq_length]; window_mask: [B, W] (1 for a
    real window); label_ids: [B]}, W the most windows a document of the batch has (at most
    `max_windows`). A document of more windows than `max_windows` trains on `max_windows` of them
    (in text order), drawn anew each time it comes (a function of the seed and its position in
    the training stream, so a resumed run draws what the uninterrupted one drew)."""
    import tensorflow as tf

    from bert_realformer.finetuning.schedule import training_order
    spec = {name: tf.io.VarLenFeature(tf.int64) for name in _TOKEN_FEATURES}
    spec.update({"label_ids": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
                 "num_windows": tf.io.FixedLenFeature([], tf.int64)})

    def decode(position, record):
        example = tf.io.parse_single_example(record, spec)
        count = example["num_windows"]
        chosen = tf.range(count)
        if max_windows:
            drawn = tf.random.experimental.stateless_shuffle(chosen, seed=tf.stack([tf.constant(seed, tf.int64),
                                                                                     position]))
            chosen = tf.sort(drawn[:max_windows])
        kept = tf.size(chosen)
        document = {}
        for name in _TOKEN_FEATURES:
            windows = tf.reshape(tf.sparse.to_dense(example[name]), [count, max_seq_length])
            document[name] = tf.cast(tf.pad(tf.gather(windows, chosen), [[0, max_windows - kept], [0, 0]]),
                                     tf.int32)
            document[name].set_shape([max_windows, max_seq_length])
        document["window_mask"] = tf.cast(tf.range(max_windows) < kept, tf.int32)
        label = example["label_ids"]
        document["label_ids"] = label if regression else tf.cast(label, tf.int32)
        return document

    def trim_windows(batch):  # to the most windows a document of the batch has
        most = tf.reduce_max(tf.reduce_sum(batch["window_mask"], axis=1))
        return {name: value[:, :most] if name != "label_ids" else value for name, value in batch.items()}

    data = training_order(tf.data.TFRecordDataset(path), seed, num_documents, shuffle_buffer_size)
    data = data.enumerate().skip(start_batch * batch_size)
    data = data.map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size, drop_remainder=True)
    return data.map(trim_windows).prefetch(tf.data.AUTOTUNE)
