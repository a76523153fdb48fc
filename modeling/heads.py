"""Output heads on top of `BertModel` and their losses, with the original formulas.

Each head keeps its weights under the TF1 names of the original script it comes from (each
model's `tf1_names` in `models.py`); each class's docstring gives them with their shapes. The masked-LM head is
a dense + activation + LayerNorm transform, then the tied word-embedding matmul plus a bias;
every other head is the original's `output_weights` [C, H] / `output_bias` [C] projection of
the pooled output or of each position's vector.
"""

import keras
from keras import ops

from modeling.activations import get_activation
from modeling.config import BertConfig
from modeling.layers import LayerNorm, create_initializer, dense, serializable
from modeling.randomness import Dropout

FINETUNING_INITIALIZER_RANGE = 0.02  # the fine-tuning scripts use a fixed 0.02, not the config's


def gather_indexes(sequence_tensor, positions):
    """Vectors at `positions`: [B, S, H] and [B, P] -> [B, P, H]."""
    return ops.take_along_axis(sequence_tensor, ops.cast(positions, "int32")[:, :, None], axis=1)


@serializable
class MaskedLMHead(keras.layers.Layer):
    """`call(sequence_output [B, S, H], positions [B, P], embedding_table [V, E])` -> float32
    log-probabilities [B, P, V]; the transform maps H to the embeddings' width E (ALBERT's
    `embedding_size`, else H)."""

    def __init__(self, config, **kwargs):
        super().__init__(autocast=False, **kwargs)  # output_bias is added in float32
        self.config = config = BertConfig.of(config)
        self.transform = dense(config.embedding_width, config.initializer_range, name="transform")
        self.transform_act = get_activation(config.hidden_act)
        self.layer_norm = LayerNorm(config.layer_norm_eps, name="layer_norm")

    def build(self, sequence_output_shape=None):
        self.transform.build((None, self.config.hidden_size))
        self.layer_norm.build((None, self.config.embedding_width))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.config.vocab_size,),
                                           initializer="zeros")

    def call(self, sequence_output, positions, embedding_table):
        x = gather_indexes(sequence_output, positions)
        x = self.layer_norm(self.transform_act(self.transform(x)))
        logits = ops.matmul(x, ops.transpose(ops.cast(embedding_table, x.dtype)))
        logits = ops.cast(logits, "float32") + self.output_bias
        return ops.log_softmax(logits, axis=-1)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


class _OutputWeightsHead(keras.layers.Layer):
    """`logits = x @ output_weights^T + output_bias`, with `output_weights` [num_outputs, H]."""

    def __init__(self, hidden_size, num_outputs, initializer_range, **kwargs):
        super().__init__(autocast=False, **kwargs)  # logits are finished in float32
        self.hidden_size = hidden_size
        self.num_outputs = num_outputs
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_outputs, self.hidden_size),
            initializer=create_initializer(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,),
                                           initializer="zeros")

    def logits(self, x):
        logits = ops.matmul(x, ops.transpose(ops.cast(self.output_weights, x.dtype)))
        return ops.cast(logits, "float32") + self.output_bias


@serializable
class NextSentenceHead(_OutputWeightsHead):
    """`call(pooled_output [B, H])` -> float32 log-probabilities [B, 2] (1 = random next)."""

    def __init__(self, config, **kwargs):
        config = BertConfig.of(config)
        super().__init__(config.hidden_size, 2, config.initializer_range, **kwargs)
        self.config = config

    def call(self, pooled_output):
        return ops.log_softmax(self.logits(pooled_output), axis=-1)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


@serializable
class ClassifierHead(_OutputWeightsHead):
    """`call(pooled_output [B, H])` -> float32 logits [B, num_labels]; dropout 0.1 in training."""

    def __init__(self, hidden_size, num_labels, dropout_prob=0.1, **kwargs):
        super().__init__(hidden_size, num_labels, FINETUNING_INITIALIZER_RANGE, **kwargs)
        self.dropout = Dropout(dropout_prob)

    def call(self, pooled_output, training=None):
        return self.logits(self.dropout(pooled_output, training=training))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size, "num_labels": self.num_outputs,
                "dropout_prob": self.dropout.rate}


@serializable
class TokenClassifierHead(_OutputWeightsHead):
    """`call(sequence_output [B, S, H], word_positions [B, W])` -> float32 logits [B, W,
    num_labels] of the tokens at `word_positions` (each word's first WordPiece); dropout 0.1
    in training, as the classifier head. With `crf=True` it also holds the CRF's
    `transitions` [num_labels, num_labels] (see `modeling.crf`)."""

    def __init__(self, hidden_size, num_labels, dropout_prob=0.1, crf=False, **kwargs):
        super().__init__(hidden_size, num_labels, FINETUNING_INITIALIZER_RANGE, **kwargs)
        self.dropout = Dropout(dropout_prob)
        self.crf = crf

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.crf:
            self.transitions = self.add_weight(
                name="transitions", shape=(self.num_outputs, self.num_outputs),
                initializer=create_initializer(self.initializer_range))

    def call(self, sequence_output, word_positions, training=None):
        words = gather_indexes(sequence_output, word_positions)
        return self.logits(self.dropout(words, training=training))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size, "num_labels": self.num_outputs,
                "dropout_prob": self.dropout.rate, "crf": self.crf}


@serializable
class ChoiceHead(_OutputWeightsHead):
    """`call(pooled_output [B*C, H], num_choices)` -> float32 scores [B, C]: one score per
    choice (`output_weights` [1, H]); dropout 0.1 in training, as the classifier head."""

    def __init__(self, hidden_size, dropout_prob=0.1, **kwargs):
        super().__init__(hidden_size, 1, FINETUNING_INITIALIZER_RANGE, **kwargs)
        self.dropout = Dropout(dropout_prob)

    def call(self, pooled_output, num_choices, training=None):
        scores = self.logits(self.dropout(pooled_output, training=training))
        return ops.reshape(scores, (-1, num_choices))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size, "dropout_prob": self.dropout.rate}


@serializable
class SpanHead(_OutputWeightsHead):
    """`call(sequence_output [B, S, H])` -> (start_logits [B, S], end_logits [B, S]), float32."""

    def __init__(self, hidden_size, **kwargs):
        super().__init__(hidden_size, 2, FINETUNING_INITIALIZER_RANGE, **kwargs)

    def call(self, sequence_output):
        logits = self.logits(sequence_output)
        return logits[:, :, 0], logits[:, :, 1]

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size}


# ---------------------------------------------------------------------------- losses
def _nll(log_probs, labels):
    """-log p(label): [..., C] and [...] -> [...]."""
    labels = ops.cast(labels, "int32")[..., None]
    return -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), axis=-1)


def masked_lm_loss(log_probs, label_ids, label_weights):
    """Weighted mean NLL with the original's +1e-5 denominator.

    Args: log_probs [B, P, V]; label_ids [B, P]; label_weights [B, P] (0 for padding slots).
    Returns: (loss [], per_example_loss [B, P]).
    """
    per_example = _nll(log_probs, label_ids)
    weights = ops.cast(label_weights, "float32")
    loss = ops.sum(weights * per_example) / (ops.sum(weights) + 1e-5)
    return loss, per_example


def next_sentence_loss(log_probs, labels):
    """Mean NLL. Args: log_probs [B, 2]; labels [B] or [B, 1]. Returns (loss, per_example [B])."""
    per_example = _nll(log_probs, ops.reshape(labels, (-1,)))
    return ops.mean(per_example), per_example
