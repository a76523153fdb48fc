"""Multi-head self-attention with optional RealFormer residual attention.

Notation: B batch, F from (query) length, T to (key) length, N heads, D size per head.

RealFormer (He et al. 2020), as the official `realformer.py`: layer l computes
`scores_l = Q K^T / sqrt(D)` and, when a previous layer exists, `cur_l = scores_l + cur_{l-1}`.
The running sum `cur_l` is what the next layer receives: unmasked and undivided. The softmax
logits are `cur_l` (mode "sum") or `cur_l / (l + 1)` (mode "mean"), then the mask adder
`(1 - mask) * -10000`. The sum is kept in float32 so that fp16/bf16 training cannot overflow it.

A warm start from a Post-LN checkpoint (`residual_attention_factor` f in [0, 1]): the logits are
`scores_l + f * cur_{l-1}` (mode "mean": divided by `1 + f * l`, the sum of the terms' weights),
while `cur_l` passed on stays the plain running sum. f = 0 is exactly Post-LN attention, f = 1
exactly the paper's.
"""

import math

import keras
from keras import ops

from modeling.layers import dense, serializable
from modeling.randomness import Dropout
from modeling.variants import Variant

MASK_ADDER = -10000.0


def attention_mask_adder(attention_mask):
    """`(1 - mask) * -10000` in float32, broadcastable to scores [B, N, F, T].

    Args:
      attention_mask: None, [B, T] (a key mask, as `input_mask`) or [B, F, T]; 1 = attend.
    Returns:
      None, or float32 [B, 1, 1, T] / [B, 1, F, T].
    """
    if attention_mask is None:
        return None
    mask = ops.cast(attention_mask, "float32")
    if len(mask.shape) == 2:  # (expand_dims, not mask[:, None, None]: TensorFlow Lite has no such slice)
        mask = ops.expand_dims(ops.expand_dims(mask, 1), 1)
    else:
        mask = ops.expand_dims(mask, 1)
    return (1.0 - mask) * MASK_ADDER


@serializable
class AttentionLayer(keras.layers.Layer):
    """Multi-head attention from `from_tensor` to `to_tensor` (`query`, `key`, `value` dense layers).

    `call(from_tensor, to_tensor, attention_mask=None, prev_attens=None)` returns
    `(context [B, F, N*D], scores [B, N, F, T] float32)`. With `residual_attention="none"` the
    scores are this layer's own scaled scores; otherwise they are the running sum to pass on as
    the next layer's `prev_attens`. `last_attention_probs` holds the softmax of the last call
    ([B, N, F, T], float32) for analysis.
    """

    def __init__(self, num_attention_heads=1, size_per_head=512, attention_probs_dropout_prob=0.0,
                 initializer_range=0.02, residual_attention="none", layer_index=0, **kwargs):
        # No autocasting: Keras would cast `prev_attens` to fp16/bf16 with the other inputs,
        # and a carried sum beyond 65504 would become inf. The dense layers cast for themselves.
        super().__init__(autocast=False, **kwargs)
        self.num_attention_heads = num_attention_heads
        self.size_per_head = size_per_head
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.residual_attention = residual_attention
        self.layer_index = layer_index
        width = num_attention_heads * size_per_head
        self.query = dense(width, initializer_range, name="query")
        self.key = dense(width, initializer_range, name="key")
        self.value = dense(width, initializer_range, name="value")
        self.dropout = Dropout(attention_probs_dropout_prob)

    def build(self, from_tensor_shape, to_tensor_shape=None):
        self.query.build(from_tensor_shape)
        self.key.build(to_tensor_shape or from_tensor_shape)
        self.value.build(to_tensor_shape or from_tensor_shape)

    def _split_heads(self, x):
        """[B, S, N*D] -> [B, N, S, D]."""
        shape = ops.shape(x)
        x = ops.reshape(x, (shape[0], shape[1], self.num_attention_heads, self.size_per_head))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, from_tensor, to_tensor, attention_mask=None, prev_attens=None, training=None,
             return_probs=False, layer_index=None, residual_attention_factor=None):
        """`layer_index`: the position of this call in the stack, where one layer's weights run at
        several (ALBERT's shared layers; the running mean divides by it); default the layer's own.
        `residual_attention_factor`: None (1), or a float32 scalar f in [0, 1] weighing the
        carried sum in this layer's logits (see the module docstring)."""
        query = self._split_heads(self.query(from_tensor))    # [B, N, F, D]
        key = self._split_heads(self.key(to_tensor))          # [B, N, T, D]
        value = self._split_heads(self.value(to_tensor))      # [B, N, T, D]

        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(float(self.size_per_head)))
        factor = None if residual_attention_factor is None else ops.cast(residual_attention_factor, "float32")
        logits = scores
        if prev_attens is not None:
            carried = ops.cast(prev_attens, "float32")
            logits = scores + (carried if factor is None else factor * carried)
            scores = scores + carried  # the running sum passed on
        if Variant(residual_attention=self.residual_attention).running_mean:
            index = float(self.layer_index if layer_index is None else layer_index)
            logits = logits / (index + 1.0 if factor is None else 1.0 + factor * index)
        adder = attention_mask_adder(attention_mask)
        if adder is not None:
            logits = logits + adder
        probs = ops.softmax(logits, axis=-1)                 # [B, N, F, T] float32
        dropped = self.dropout(probs, training=training)

        context = ops.matmul(ops.cast(dropped, value.dtype), value)   # [B, N, F, D]
        context = ops.transpose(context, (0, 2, 1, 3))
        shape = ops.shape(context)
        context = ops.reshape(context, (shape[0], shape[1], self.num_attention_heads * self.size_per_head))
        if return_probs:
            return context, scores, probs
        return context, scores

    def compute_output_spec(self, from_tensor, to_tensor, attention_mask=None, prev_attens=None,
                            training=None, return_probs=False, layer_index=None, residual_attention_factor=None):
        batch, from_len = from_tensor.shape[0], from_tensor.shape[1]
        to_len = to_tensor.shape[1]
        width = self.num_attention_heads * self.size_per_head
        context = keras.KerasTensor((batch, from_len, width), dtype=self.compute_dtype)
        scores = keras.KerasTensor((batch, self.num_attention_heads, from_len, to_len), dtype="float32")
        return (context, scores, scores) if return_probs else (context, scores)

    def get_config(self):
        return {**super().get_config(),
                "num_attention_heads": self.num_attention_heads,
                "size_per_head": self.size_per_head,
                "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
                "initializer_range": self.initializer_range,
                "residual_attention": self.residual_attention,
                "layer_index": self.layer_index}


def attention_layer(from_tensor, to_tensor, attention_mask=None, num_attention_heads=1,
                    size_per_head=512, attention_probs_dropout_prob=0.0, initializer_range=0.02,
                    prev_attens=None, residual_attention="none", layer_index=0, training=False,
                    name="self"):
    """Functional form, like the original `attention_layer`: builds an `AttentionLayer` and calls it.

    Args:
      from_tensor: [B, F, W] float.
      to_tensor: [B, T, W] float.
      attention_mask: None, [B, T] or [B, F, T], 1 for positions that may be attended to.
      prev_attens: None or [B, N, F, T], the running score sum from the previous layer.
    Returns:
      (context [B, F, N*D], scores [B, N, F, T] float32).
    """
    layer = AttentionLayer(num_attention_heads=num_attention_heads, size_per_head=size_per_head,
                           attention_probs_dropout_prob=attention_probs_dropout_prob,
                           initializer_range=initializer_range,
                           residual_attention=residual_attention, layer_index=layer_index,
                           name=name)
    return layer(from_tensor, to_tensor, attention_mask=attention_mask, prev_attens=prev_attens,
                 training=training)
