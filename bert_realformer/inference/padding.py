"""Dynamic padding: a batch cut to its longest sequence instead of the fixed --max_seq_length.

Attention costs the square of the padded length and the feed-forward layers its length, so a
batch of 30-token reviews padded to 512 pays for 512. `trim_to_longest` cuts the sequence axis
(the last one) of a batch's token features to the longest real sequence in it, rounded up to a
multiple of `LENGTH_MULTIPLE`, so that at most max_seq_length / 8 shapes reach the model (and a
graph traced with `reduce_retracing` sees only a few). Prediction compiled by XLA, which compiles
once per shape, rounds up to a length bucket instead (`buckets`; `bucket_step`: multiples of
16 up to 128, then 8 buckets per doubling: at most 16 shapes up to 512, and at most 1/8 more
tokens than the longest). The outputs at real positions equal the fully padded ones: padding is
masked out of attention and never changes a real token's values.
"""

import tensorflow as tf

LENGTH_MULTIPLE = 8
SMALLEST_BUCKET_STEP = 16
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_type_ids")


def bucket_step(longest):
    """The rounding step of a length bucket for a batch whose longest sequence is `longest`
    (int32 tensor): the power of two at or above it divided by 8, at least 16 (16 up to 128,
    32 up to 256, 64 up to 512, ...)."""
    above = tf.maximum(longest, 1) - 1
    for shift in (1, 2, 4, 8, 16):  # every bit below the highest set: the power of two - 1
        above = tf.bitwise.bitwise_or(above, tf.bitwise.right_shift(above, shift))
    return tf.maximum((above + 1) // 8, SMALLEST_BUCKET_STEP)


def padded_length(lengths, max_seq_length: int, buckets: bool = False):
    """The longest of `lengths` (int tensor) rounded up to a multiple of `LENGTH_MULTIPLE` (with
    `buckets`, to its length bucket), at most `max_seq_length`."""
    longest = tf.cast(tf.reduce_max(lengths), tf.int32)
    step = bucket_step(longest) if buckets else LENGTH_MULTIPLE
    return tf.cast(tf.minimum((longest + step - 1) // step * step, max_seq_length), lengths.dtype)


def trim_to_longest(features: dict, names=TOKEN_FEATURES, buckets: bool = False) -> dict:
    """A batch of features [B, ..., S] (`input_mask` marks the real tokens) with the last axis
    of the features `names` cut to `padded_length`; other features unchanged."""
    mask = features["input_mask"]
    full = tf.shape(mask)[-1]
    length = padded_length(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1), full, buckets)
    return {name: value[..., :length] if name in names else value for name, value in features.items()}


def trim_to_bucket(features: dict) -> dict:
    """`trim_to_longest` to the length buckets (what XLA-compiled prediction takes)."""
    return trim_to_longest(features, buckets=True)


def pad_to(values, length: int, fill: float):
    """[B, L, ...] -> [B, length, ...], filled with `fill` past L (outputs back to the fixed
    length where callers index positions up to --max_seq_length)."""
    extra = length - tf.shape(values)[1]
    paddings = [[0, 0], [0, extra]] + [[0, 0]] * (len(values.shape) - 2)
    return tf.pad(values, paddings, constant_values=fill)
