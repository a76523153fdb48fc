"""The Transformer encoder: a stack of blocks, post-LN (original BERT) or pre-LN.

Post-LN block (original):  a = LN(x + Dropout(Dense(Attn(x))));  y = LN(a + Dropout(FFN(a)))
Pre-LN block:              a = x + Dropout(Dense(Attn(LN(x))));  y = a + Dropout(FFN(LN(a)))
and Pre-LN applies one final LayerNorm after the last block. Either kind may use RealFormer
residual attention: each block passes its running score sum to the next.

ALBERT's encoder is the same stack with two differences its config states: the embeddings
(narrower, `embedding_size`) are projected to `hidden_size` first, and the layers may share
weights (`num_hidden_groups`): then one block runs at several depths, the running score sum
carried from each run to the next as between distinct blocks.

A RealFormer encoder holds `residual_attention_factor` (a float32 scalar, 1 unless set): the weight
of the carried scores in each layer's logits (`modeling.attention`). A warm start from a Post-LN
checkpoint raises it from 0 to 1 (`modeling.set_residual_attention_factor`); it is not one of the
model's TF1 weights, so no checkpoint holds it and every checkpoint reads as the plain variant.
"""

import keras

from modeling.activations import get_activation
from modeling.attention import AttentionLayer
from modeling.config import BertConfig
from modeling.layers import LayerNorm, dense, serializable
from modeling.randomness import Dropout, StreamSeedGenerator


@serializable
class TransformerBlock(keras.layers.Layer):
    """One encoder layer. Shapes: x [B, S, H] -> y [B, S, H]; scores [B, N, S, S] float32."""

    def __init__(self, config, layer_index, **kwargs):
        super().__init__(autocast=False, **kwargs)  # keeps `prev_attens` float32, see attention.py
        self.config = config = BertConfig.of(config)
        self.layer_index = layer_index
        self.pre_ln = config.variant.pre_ln
        init = config.initializer_range
        self.attention = AttentionLayer(
            num_attention_heads=config.num_attention_heads, size_per_head=config.size_per_head,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            initializer_range=init, residual_attention=config.residual_attention,
            layer_index=layer_index, name="self")
        self.attention_output = dense(config.hidden_size, init, name="attention_output")
        self.intermediate = dense(config.intermediate_size, init, name="intermediate")
        self.output_dense = dense(config.hidden_size, init, name="output")
        self.intermediate_act = get_activation(config.hidden_act)
        # Post-LN: after each residual add. Pre-LN: before each sublayer.
        self.attention_layer_norm = LayerNorm(config.layer_norm_eps, name="attention_layer_norm")
        self.output_layer_norm = LayerNorm(config.layer_norm_eps, name="output_layer_norm")
        # One dropout layer per site: in a random stream each draws once per forward pass.
        self.attention_output_dropout = Dropout(config.hidden_dropout_prob)
        self.output_dropout = Dropout(config.hidden_dropout_prob)

    def build(self, x_shape):
        hidden, inter = self.config.hidden_size, self.config.intermediate_size
        self.attention.build(x_shape)
        self.attention_output.build(x_shape[:-1] + (hidden,))
        self.intermediate.build(x_shape[:-1] + (hidden,))
        self.output_dense.build(x_shape[:-1] + (inter,))
        self.attention_layer_norm.build(x_shape)
        self.output_layer_norm.build(x_shape)

    def _feed_forward(self, x, training):
        h = self.intermediate_act(self.intermediate(x))
        return self.output_dropout(self.output_dense(h), training=training)

    def call(self, x, attention_mask=None, prev_attens=None, training=None, return_probs=False,
             layer_index=None, residual_attention_factor=None):
        """`layer_index`: the depth this call runs at (a shared block runs at several);
        `residual_attention_factor`: the carried scores' weight (`AttentionLayer.call`)."""
        x = keras.ops.cast(x, self.compute_dtype)
        attn_in = self.attention_layer_norm(x) if self.pre_ln else x
        context, scores, *probs = self.attention(attn_in, attn_in, attention_mask=attention_mask,
                                                 prev_attens=prev_attens, training=training,
                                                 return_probs=return_probs, layer_index=layer_index,
                                                 residual_attention_factor=residual_attention_factor)
        attn = self.attention_output_dropout(self.attention_output(context), training=training)
        if self.pre_ln:
            x = x + attn
            y = x + self._feed_forward(self.output_layer_norm(x), training)
        else:
            x = self.attention_layer_norm(attn + x)
            y = self.output_layer_norm(self._feed_forward(x, training) + x)
        return (y, scores, *probs)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(),
                "layer_index": self.layer_index}


@serializable
class TransformerEncoder(keras.layers.Layer):
    """`num_hidden_layers` layers (+ a final LayerNorm for Pre-LN), run by `blocks`: one block per
    layer, or ALBERT's `num_hidden_groups` blocks, each run by consecutive layers (`block_for`).

    `call(x [B, S, E], attention_mask [B, S])` (E: `embedding_width`, projected to H first where
    it is ALBERT's `embedding_size`) returns `(layer_outputs, attention_probs)`: a list
    of L tensors [B, S, H] (the last one after the final LayerNorm, so it always equals the
    sequence output) and, when asked for, a list of L float32 tensors [B, N, S, S], else None.
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config = BertConfig.of(config)
        self.embedding_projection = (dense(config.hidden_size, config.initializer_range,
                                           name="embedding_hidden_mapping_in")
                                     if config.embedding_size is not None else None)
        grouped = config.num_hidden_groups is not None
        self.blocks = [TransformerBlock(config, layer_index=i, name=f"group_{i}" if grouped else f"layer_{i}")
                       for i in range(config.num_layer_groups)]
        self.final_layer_norm = (LayerNorm(config.layer_norm_eps, name="final_layer_norm")
                                 if config.variant.pre_ln else None)
        # Progressive Layer Dropping: one gate (seed generator) per layer.
        self._pld_gates = [StreamSeedGenerator(name=f"pld_gate_{i}")
                           for i in range(config.num_hidden_layers)]
        self.residual_attention_factor = (
            self.add_weight(shape=(), initializer="ones", dtype="float32", trainable=False, autocast=False,
                            name="residual_attention_factor")
            if config.variant.is_realformer else None)
        # A traced training step's own factor (a tensor of its step), used instead while it is set
        # (`modeling.residual_attention_factor_scope`): a replica's step cannot assign a variable.
        self.factor_override = None

    def build(self, x_shape):
        if self.embedding_projection is not None:
            self.embedding_projection.build(x_shape)
            x_shape = (*x_shape[:-1], self.config.hidden_size)
        for block in self.blocks:
            block.build(x_shape)
        if self.final_layer_norm is not None:
            self.final_layer_norm.build(x_shape)

    def block_for(self, layer_index: int) -> TransformerBlock:
        """The block layer `layer_index` runs (its own, or its ALBERT group's)."""
        return self.blocks[self.config.group_of_layer(layer_index)]

    def call(self, x, attention_mask=None, training=None, return_probs=False,
             layer_keep_probs=None):
        """`layer_keep_probs` (float [L], training only): Progressive Layer Dropping. Layer l is
        run with probability p_l, its change to the hidden states scaled by 1/p_l; otherwise it is
        skipped (not computed) and hidden states and RealFormer scores pass through unchanged."""
        residual = self.config.variant.is_realformer
        factor = self.residual_attention_factor if self.factor_override is None else self.factor_override
        prev_attens = None
        layer_outputs, all_probs = [], []
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        for index in range(self.config.num_hidden_layers):
            if training and layer_keep_probs is not None and not return_probs:
                x, scores = self._maybe_skip(index, x, attention_mask, prev_attens,
                                             layer_keep_probs[index], factor)
                probs = []
            else:
                x, scores, *probs = self.block_for(index)(
                    x, attention_mask=attention_mask, prev_attens=prev_attens, training=training,
                    return_probs=return_probs, layer_index=index, residual_attention_factor=factor)
            if residual:
                prev_attens = scores
            layer_outputs.append(x)
            all_probs.extend(probs)
        if self.final_layer_norm is not None:
            layer_outputs[-1] = self.final_layer_norm(layer_outputs[-1])
        return layer_outputs, (all_probs if return_probs else None)

    def _maybe_skip(self, index, x, attention_mask, prev_attens, keep_prob, factor):
        """Runs block `index` with probability `keep_prob` (its change scaled by 1/keep_prob),
        else passes `x` (and the RealFormer running sum) through. Returns (x, scores or None)."""
        block = self.block_for(index)
        x = keras.ops.cast(x, self.compute_dtype)
        carried = self.config.variant.is_realformer
        if carried and prev_attens is None:  # nothing carried yet: a skipped first layer passes zeros
            batch, length = keras.ops.shape(x)[0], keras.ops.shape(x)[1]
            prev_attens = keras.ops.zeros((batch, self.config.num_attention_heads, length, length))
        keep = keras.random.uniform((), seed=self._pld_gates[index]) < keep_prob

        def run():
            y, scores = block(x, attention_mask=attention_mask, prev_attens=prev_attens, training=True,
                              layer_index=index, residual_attention_factor=factor)
            y = x + (y - x) * keras.ops.cast(1.0 / keep_prob, y.dtype)
            return (y, scores) if carried else y

        def skip():
            return (x, prev_attens) if carried else x

        out = keras.ops.cond(keep, run, skip)
        return out if carried else (out, None)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}
