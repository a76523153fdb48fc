"""Dynamic padding: a batch cut to its longest sequence instead of the fixed --max_seq_length.

Attention costs the square of the padded length and the feed-forward layers its length, so a
batch of 30-token reviews padded to 512 pays for 512. `trim_to_longest` cuts the sequence axis
(the last one) of a batch's token features to the longest real sequence in it, rounded up to a
multiple of `LENGTH_MULTIPLE`, so that at most max_seq_length / 8 shapes reach the model (and a
graph traced with `reduce_retracing` sees only a few). The outputs at real positions equal the
fully padded ones: padding is masked out of attention and never changes a real token's values.
"""

import tensorflow as tf

LENGTH_MULTIPLE = 8
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_type_ids")


def padded_length(lengths, max_seq_length: int, multiple: int = LENGTH_MULTIPLE):
    """The longest of `lengths` (int tensor) rounded up to `multiple`, at most `max_seq_length`."""
    longest = tf.reduce_max(lengths)
    return tf.minimum((longest + multiple - 1) // multiple * multiple, max_seq_length)


def trim_to_longest(features: dict, names=TOKEN_FEATURES, multiple: int = LENGTH_MULTIPLE) -> dict:
    """A batch of features [B, ..., S] (`input_mask` marks the real tokens) with the last axis
    of the features `names` cut to `padded_length`; other features unchanged."""
    mask = features["input_mask"]
    full = tf.shape(mask)[-1]
    length = padded_length(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1), full, multiple)
    return {name: value[..., :length] if name in names else value for name, value in features.items()}


def pad_to(values, length: int, fill: float):
    """[B, L, ...] -> [B, length, ...], filled with `fill` past L (outputs back to the fixed
    length where callers index positions up to --max_seq_length)."""
    extra = length - tf.shape(values)[1]
    paddings = [[0, 0], [0, extra]] + [[0, 0]] * (len(values.shape) - 2)
    return tf.pad(values, paddings, constant_values=fill)
