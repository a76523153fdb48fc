"""The original `modeling.py`'s module-level functions, for code written against it.

The original builds a TF1 graph: a function such as `layer_norm` or `transformer_model` creates
its variables each time it is called and returns the output tensor. Here each one builds the
Keras layer (or variables) this package's models use for the same thing, with fresh weights,
and calls it once, so it computes what the original's computes for the same weights (the
models themselves are checked against the original's outputs). Code that keeps its weights
across calls uses the layers (`LayerNorm`, `BertEmbeddings`, `TransformerEncoder`) or the models.

As in the original, dropout here is applied whenever its probability is above 0 (the original's
callers pass 0 outside training).
"""

import keras
from keras import ops

from modeling.activations import gelu
from modeling.config import BertConfig
from modeling.encoder import TransformerEncoder
from modeling.layers import LayerNorm, create_initializer, get_shape_list


def dropout(input_tensor, dropout_prob):
    """`input_tensor` with each value zeroed with probability `dropout_prob` and the others
    scaled by 1 / (1 - dropout_prob); unchanged for None or 0."""
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    return keras.random.dropout(input_tensor, rate=dropout_prob)


def layer_norm(input_tensor, name=None):
    """LayerNorm over the last axis, with a new gamma (ones) and beta (zeros)."""
    return LayerNorm(name=name)(input_tensor)


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None):
    """`dropout(layer_norm(input_tensor))`."""
    return dropout(layer_norm(input_tensor, name), dropout_prob)


def new_table(name, shape, initializer_range):
    """A new embedding table [rows, width] drawn as the original draws one (truncated normal)."""
    return keras.Variable(create_initializer(initializer_range)(shape), name=name)


def embedding_lookup(input_ids, vocab_size, embedding_size=128, initializer_range=0.02,
                     word_embedding_name="word_embeddings", use_one_hot_embeddings=False):
    """The word embeddings of `input_ids` from a new table.

    Args:
      input_ids: int [B, S] (or [B, S, 1], as the original also takes).
    Returns:
      (output float [B, S, embedding_size], embedding_table [vocab_size, embedding_size]).
    """
    table = new_table(word_embedding_name, (vocab_size, embedding_size), initializer_range)
    ids = input_ids if len(input_ids.shape) == 2 else ops.squeeze(input_ids, axis=-1)
    if use_one_hot_embeddings:  # (the original's TPU path: the same values)
        output = ops.matmul(ops.one_hot(ids, vocab_size, dtype=table.dtype), table)
    else:
        output = ops.take(table, ids, axis=0)
    return output, table


def embedding_postprocessor(input_tensor, use_token_type=False, token_type_ids=None, token_type_vocab_size=16,
                            token_type_embedding_name="token_type_embeddings", use_position_embeddings=True,
                            position_embedding_name="position_embeddings", initializer_range=0.02,
                            max_position_embeddings=512, dropout_prob=0.1):
    """`input_tensor` [B, S, W] plus the token-type embeddings of `token_type_ids` [B, S] and
    the embeddings of positions 0..S-1 (new tables, each where asked for), then LayerNorm and
    dropout. Returns float [B, S, W]."""
    _, seq_length, width = get_shape_list(input_tensor, expected_rank=3)
    output = input_tensor
    if use_token_type:
        if token_type_ids is None:
            raise ValueError("`token_type_ids` must be specified if `use_token_type` is True")
        table = new_table(token_type_embedding_name, (token_type_vocab_size, width), initializer_range)
        output = output + ops.take(table, token_type_ids, axis=0)
    if use_position_embeddings:
        if isinstance(seq_length, int) and seq_length > max_position_embeddings:
            raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                             f"{max_position_embeddings}")
        table = new_table(position_embedding_name, (max_position_embeddings, width), initializer_range)
        output = output + ops.expand_dims(ops.convert_to_tensor(table)[:seq_length], 0)
    return layer_norm_and_dropout(output, dropout_prob)


def create_attention_mask_from_input_mask(from_tensor, to_mask):
    """The 3D attention mask of a 2D input mask: float32 [B, F, T], row f of example b being
    `to_mask[b]`, for `from_tensor` [B, F] or [B, F, W] and `to_mask` int [B, T]."""
    batch_size, from_length = get_shape_list(from_tensor, expected_rank=[2, 3])[:2]
    to_mask = ops.cast(ops.expand_dims(to_mask, 1), "float32")  # [B, 1, T]
    return ops.ones((batch_size, from_length, 1), dtype="float32") * to_mask


def transformer_model(input_tensor, attention_mask=None, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, intermediate_act_fn=gelu,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
                      do_return_all_layers=False):
    """The original's Post-LN Transformer ("Attention is All You Need") over `input_tensor`
    [B, S, hidden_size], with new weights (this package's `TransformerEncoder`).

    Args:
      attention_mask: None, or [B, S, S] / [B, S]: 1 where a position may be attended to.
      intermediate_act_fn: any function of a tensor (the feed-forward layer's activation).
    Returns:
      the last layer's output [B, S, hidden_size], or with `do_return_all_layers` a list of
      every layer's.
    """
    if hidden_size % num_attention_heads:
        raise ValueError(f"The hidden size ({hidden_size}) is not a multiple of the number of attention heads "
                         f"({num_attention_heads})")
    width = get_shape_list(input_tensor, expected_rank=3)[2]
    if width != hidden_size:
        raise ValueError(f"The width of the input tensor ({width}) != hidden size ({hidden_size})")
    config = BertConfig(vocab_size=None, hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
                        num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
                        hidden_dropout_prob=hidden_dropout_prob,
                        attention_probs_dropout_prob=attention_probs_dropout_prob,
                        initializer_range=initializer_range)
    encoder = TransformerEncoder(config)
    for block in encoder.blocks:
        block.intermediate_act = intermediate_act_fn
    dropping = bool(hidden_dropout_prob or attention_probs_dropout_prob)
    layer_outputs, _ = encoder(input_tensor, attention_mask=attention_mask, training=dropping)
    return layer_outputs if do_return_all_layers else layer_outputs[-1]
