"""Examples -> fixed-length features, cached as TFRecord like the original run_classifier.

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated as the original (tokens dropped from the
end of the longer text), zero padded. Record features: `input_ids`, `input_mask`,
`segment_ids` (int64 x max_seq_length), `label_ids` (int64, or float for regression),
`is_real_example` (int64). A cache file is re-used only when its key (a digest of the examples
as read, the vocabulary's contents, casing, length, labels: `_cache_key`) matches; otherwise
it is rebuilt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bert_realformer.tfrecords import encode_example, float_feature, int64_feature
from tasks.feature_cache import cached_records, digest, file_digest
from tasks.sequences import pack

if TYPE_CHECKING:  # annotations only
    import tensorflow as tf

    from tasks.classifier_data import InputExample
    from tokenization import FullTokenizer


def convert_example(example, label_map, max_seq_length, tokenizer):
    """-> {input_ids, input_mask, segment_ids, label_id} (lists; label_id int or float)."""
    ids_b = tokenizer.tokenize_to_ids(example.text_b) if example.text_b else None
    input_ids, segment_ids = pack(tokenizer.tokenize_to_ids(example.text_a), ids_b, max_seq_length,
                                  tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"])
    n = len(input_ids)
    pad = [0] * (max_seq_length - n)
    label = float(example.label) if label_map is None else label_map[example.label]
    return {"input_ids": input_ids + pad, "input_mask": [1] * n + pad,
            "segment_ids": segment_ids + pad, "label_id": label}


def feature_spec(max_seq_length, regression=False):
    import tensorflow as tf
    return {"input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64)}


def _cache_key(examples, label_list, max_seq_length, tokenizer):
    """Everything the features depend on: the examples themselves (so any option that changes
    what is read -- the XNLI language, MNLI mismatched, the generic format's columns -- changes the
    key), the vocabulary's contents, casing, length and labels."""
    return {"examples": digest([e.text_a, e.text_b, e.label] for e in examples),
            "vocab": file_digest(tokenizer.vocab_file), "do_lower_case": tokenizer.do_lower_case,
            "max_seq_length": max_seq_length, "labels": label_list}


def cached_features(examples: list[InputExample], label_list: list[str] | None, max_seq_length: int,
                    tokenizer: FullTokenizer, path: str) -> bool:
    """Writes `path` (and `path.key`) unless a cache with the same key exists. Returns True
    when the cache was re-used."""
    label_map = None if label_list is None else {label: i for i, label in enumerate(label_list)}

    def records():
        for example in examples:
            f = convert_example(example, label_map, max_seq_length, tokenizer)
            label = float_feature([f["label_id"]]) if label_map is None else int64_feature([f["label_id"]])
            yield encode_example({
                "input_ids": int64_feature(f["input_ids"]), "input_mask": int64_feature(f["input_mask"]),
                "segment_ids": int64_feature(f["segment_ids"]), "label_ids": label,
                "is_real_example": int64_feature([1])})

    reused, _ = cached_records(path, _cache_key(examples, label_list, max_seq_length, tokenizer), records)
    return reused


def make_dataset(path: str, batch_size: int, max_seq_length: int, is_training: bool, regression: bool = False,
                 seed: int | None = None, start_batch: int = 0) -> tf.data.Dataset:
    """Training: shuffled (buffer 100, as the original), repeated, remainder dropped, from
    batch `start_batch` of the seed's sequence on. Eval/predict: in order, the last batch kept."""
    import tensorflow as tf
    spec = feature_spec(max_seq_length, regression)
    from training.per_example import training_batches
    d = tf.data.TFRecordDataset(path)
    d = training_batches(d, batch_size, seed, start_batch) if is_training else d.batch(batch_size)

    def decode(records):
        example = tf.io.parse_example(records, spec)
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}
    return d.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
