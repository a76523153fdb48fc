"""`BertModel` with heads: one Keras model per task script (pretraining and each fine-tuning
task), its head from `heads.py`.

Each model keeps the encoder as `.bert`, so `model.bert` is a plain `BertModel`.
"""

import collections
import collections.abc
import contextlib

import keras
import numpy as np

from modeling.bert import WORD_EMBEDDING_DELTA, BertModel
from modeling.config import BertConfig
from modeling.heads import (
    ChoiceHead,
    ClassifierHead,
    MaskedLMHead,
    NextSentenceHead,
    SpanHead,
    TokenClassifierHead,
    masked_lm_loss,
    next_sentence_loss,
)
from modeling.layers import ENCODER_INPUTS, DeclaredInputs, dense_names, int32_inputs, layer_norm_names, serializable


class BertWithHeads(DeclaredInputs, keras.Model):
    """A `BertModel` (`.bert`) with a task's heads: what every model below shares. A subclass
    makes its heads in `__init__` after this one's, lists them in `heads`, names their weights in
    `head_names` and its own constructor arguments in `options` (for `get_config`)."""

    def __init__(self, config: BertConfig | dict, name: str, **kwargs):
        super().__init__(name=name, **kwargs)
        self.config = BertConfig.from_dict(config) if isinstance(config, dict) else config
        self.bert = BertModel(self.config)

    def heads(self) -> list[keras.layers.Layer]:
        raise NotImplementedError

    def head_names(self) -> list[tuple[str, keras.Variable]]:
        raise NotImplementedError

    def options(self) -> dict:
        return {}

    def build(self, input_shape=None):
        self.bert.build()
        for head in self.heads():
            head.build()
        self.built = True

    def tf1_names(self) -> list[tuple[str, keras.Variable]]:
        """The encoder's TF1 names (`BertModel.tf1_names`), then the heads' (`head_names`)."""
        return [*self.bert.tf1_names(), *self.head_names()]

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, **self.options()}


@serializable
class BertPretrainer(BertWithHeads):
    """MLM + NSP, as the original `run_pretraining.model_fn`; MLM alone with
    `next_sentence=False` (RoBERTa's recipe: no `cls/seq_relationship` head at all).

    `call(features)` with `input_ids`, `input_mask`, `segment_ids` or `token_type_ids` [B, S] and
    `masked_lm_positions` [B, P] returns the encoder outputs plus `masked_lm_log_probs`
    [B, P, V] and, with the NSP head, `next_sentence_log_probs` [B, 2] (float32).
    """

    def __init__(self, config: BertConfig, next_sentence: bool = True, name: str = "pretrainer", **kwargs):
        super().__init__(config, name, **kwargs)
        self.masked_lm = MaskedLMHead(self.config, name="predictions")
        self.next_sentence = NextSentenceHead(self.config, name="seq_relationship") if next_sentence else None

    def heads(self):
        return [self.masked_lm] + ([self.next_sentence] if self.next_sentence is not None else [])

    def head_names(self):
        """`cls/predictions/...` and, with NSP, `cls/seq_relationship/...`."""
        mlm, nsp = self.masked_lm, self.next_sentence
        names = [*dense_names("cls/predictions/transform/dense", mlm.transform),
                 *layer_norm_names("cls/predictions/transform/LayerNorm", mlm.layer_norm),
                 ("cls/predictions/output_bias", mlm.output_bias)]
        if nsp is None:  # MLM only
            return names
        return names + [("cls/seq_relationship/output_weights", nsp.output_weights),
                        ("cls/seq_relationship/output_bias", nsp.output_bias)]

    def options(self):
        return {"next_sentence": self.next_sentence is not None}

    def input_signature(self):
        return int32_inputs((*ENCODER_INPUTS, "masked_lm_positions"))

    def call(self, features, training=False, layer_keep_probs=None):
        outputs = dict(self.bert(encoder_inputs(features), training=training,
                                 layer_keep_probs=layer_keep_probs))
        outputs["masked_lm_log_probs"] = self.masked_lm(
            outputs["sequence_output"], features["masked_lm_positions"],
            self.bert.get_embedding_table())
        if self.next_sentence is not None:
            outputs["next_sentence_log_probs"] = self.next_sentence(outputs["pooled_output"])
        return outputs


def pretraining_losses(outputs: dict, features: dict) -> dict:
    """The original's losses. Returns a dict of scalars and per-example tensors:
    `masked_lm_loss`, `masked_lm_example_loss` [B, P], `next_sentence_loss`,
    `next_sentence_example_loss` [B] (these two only when `outputs` has NSP log-probabilities),
    `total_loss` (= MLM + NSP)."""
    mlm, mlm_examples = masked_lm_loss(outputs["masked_lm_log_probs"], features["masked_lm_ids"],
                                       features["masked_lm_weights"])
    losses = {"masked_lm_loss": mlm, "masked_lm_example_loss": mlm_examples, "total_loss": mlm}
    if "next_sentence_log_probs" in outputs:
        nsp, nsp_examples = next_sentence_loss(outputs["next_sentence_log_probs"],
                                               features["next_sentence_labels"])
        losses.update(next_sentence_loss=nsp, next_sentence_example_loss=nsp_examples, total_loss=mlm + nsp)
    return losses


@serializable
class BertClassifier(BertWithHeads):
    """Pooled output [B, H] -> dropout -> `output_weights`/`output_bias`: logits [B, num_labels]."""

    def __init__(self, config: BertConfig, num_labels: int, name: str = "classifier", **kwargs):
        super().__init__(config, name, **kwargs)
        self.num_labels = num_labels
        self.classifier = ClassifierHead(self.config.hidden_size, num_labels, name="classifier")

    def heads(self):
        return [self.classifier]

    def head_names(self):
        """The original classifier's `output_weights`/`output_bias`."""
        return [("output_weights", self.classifier.output_weights), ("output_bias", self.classifier.output_bias)]

    def options(self):
        return {"num_labels": self.num_labels}

    def call(self, features, training=False):
        pooled = self.bert(encoder_inputs(features), training=training)["pooled_output"]
        return self.classifier(pooled, training=training)


@serializable
class BertSpanLabeler(BertWithHeads):
    """Sequence output [B, S, H] -> `cls/squad` span logits: (start_logits [B, S], end_logits [B, S])."""

    def __init__(self, config: BertConfig, name: str = "span_labeler", **kwargs):
        super().__init__(config, name, **kwargs)
        self.span = SpanHead(self.config.hidden_size, name="squad")

    def heads(self):
        return [self.span]

    def head_names(self):
        """The original run_squad's `cls/squad/...`."""
        return [("cls/squad/output_weights", self.span.output_weights),
                ("cls/squad/output_bias", self.span.output_bias)]

    def call(self, features, training=False):
        sequence = self.bert(encoder_inputs(features), training=training)["sequence_output"]
        return self.span(sequence)


@serializable
class BertTokenClassifier(BertWithHeads):
    """Sequence output -> a tag score per word (`cls/ner/...`), for NER.

    `call(features)` with the encoder inputs and `word_positions` [B, W] (the position of each
    word's first WordPiece; padding slots point anywhere) returns float32 logits [B, W,
    num_labels]. With `crf=True` the head also holds the CRF transition matrix
    (`model.head.transitions`), used by the loss and by Viterbi decoding (`modeling.crf`).
    """

    def __init__(self, config: BertConfig, num_labels: int, crf: bool = False, name: str = "token_classifier",
                 **kwargs):
        super().__init__(config, name, **kwargs)
        self.num_labels = num_labels
        self.crf = crf
        self.head = TokenClassifierHead(self.config.hidden_size, num_labels, crf=crf, name="ner")

    def heads(self):
        return [self.head]

    def head_names(self):
        """`cls/ner/...` (with the CRF's `cls/ner/transitions`)."""
        names = [("cls/ner/output_weights", self.head.output_weights), ("cls/ner/output_bias", self.head.output_bias)]
        return names + ([("cls/ner/transitions", self.head.transitions)] if self.crf else [])

    def options(self):
        return {"num_labels": self.num_labels, "crf": self.crf}

    def input_signature(self):
        return int32_inputs((*ENCODER_INPUTS, "word_positions"))

    def call(self, features, training=False):
        sequence = self.bert(encoder_inputs(features), training=training)["sequence_output"]
        return self.head(sequence, features["word_positions"], training=training)


@serializable
class BertMultipleChoice(BertWithHeads):
    """SWAG-style multiple choice: each choice is its own `[CLS] A [SEP] B [SEP]` sequence; the
    pooled output of each gives one score (`cls/multiple_choice/...`).

    `call(features)` with `input_ids`, `input_mask`, `segment_ids` [B, C, S] and `choice_mask`
    [B, C] (0 for padding choices) returns float32 scores [B, C], padding choices at -1e9.
    """

    def __init__(self, config: BertConfig, name: str = "multiple_choice", **kwargs):
        super().__init__(config, name, **kwargs)
        self.head = ChoiceHead(self.config.hidden_size, name="multiple_choice")

    def heads(self):
        return [self.head]

    def head_names(self):
        """`cls/multiple_choice/...`."""
        return [("cls/multiple_choice/output_weights", self.head.output_weights),
                ("cls/multiple_choice/output_bias", self.head.output_bias)]

    def input_signature(self):
        """[B, C, S] sequences, one per choice, and `choice_mask` [B, C]."""
        return {**int32_inputs(ENCODER_INPUTS, rank=3), **int32_inputs(("choice_mask",))}

    def call(self, features, training=False):
        shape = keras.ops.shape(features["input_ids"])
        flat = {k: keras.ops.reshape(v, (-1, shape[2], *v.shape[3:])) for k, v in encoder_inputs(features).items()}
        pooled = self.bert(flat, training=training)["pooled_output"]
        scores = self.head(pooled, num_choices=shape[1], training=training)
        real = keras.ops.cast(features["choice_mask"], "float32")
        return scores * real + (1.0 - real) * -1e9


def encoder_inputs(features: dict) -> dict:
    """The `BertModel` inputs from a feature dict that may name segment ids `segment_ids`
    (the TFRecord name) or `token_type_ids`."""
    inputs = {"input_ids": features["input_ids"]}
    if WORD_EMBEDDING_DELTA in features:
        inputs[WORD_EMBEDDING_DELTA] = features[WORD_EMBEDDING_DELTA]
    if "input_mask" in features:
        inputs["input_mask"] = features["input_mask"]
    types = features.get("token_type_ids", features.get("segment_ids"))
    if types is not None:
        inputs["token_type_ids"] = types
    return inputs


def tf1_variable_map(model: keras.Model) -> dict[str, keras.Variable]:
    """{TF1 name: variable} of a `BertModel` or a model with heads (built if needed): the names
    each model class declares (`tf1_names`), under which checkpoints are read and written."""
    if not model.built:
        model.build()
    if not hasattr(model, "tf1_names"):
        raise TypeError(f"no TF1 name map for {type(model).__name__}")
    return dict(model.tf1_names())


def freeze_encoder(model: keras.Model) -> int:
    """Freezes every weight of `model`'s encoder (TF1 names under `bert/`, the word embeddings
    its MLM head's output shares included), so only its heads (`cls/`) train: the heads fitted
    to an encoder released without them. Returns how many weights stay trainable."""
    for name, variable in tf1_variable_map(model).items():
        variable.trainable = not name.startswith("bert/")
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def _realformer_encoder(model: keras.Model):
    """The `TransformerEncoder` of a `BertModel` or a model with heads, which must carry scores."""
    encoder = (model if isinstance(model, BertModel) else model.bert).encoder
    if encoder.residual_attention_factor is None:
        raise ValueError(f"{model.config.variant.name} carries no attention scores: only a RealFormer "
                         "model has a residual attention factor")
    return encoder


def set_residual_attention_factor(model: keras.Model, factor: float) -> None:
    """Weighs the scores each layer of a RealFormer `model` is handed by `factor` in [0, 1]: 0
    computes exactly the Post-LN (or Pre-LN) model of the same weights, 1 (as built) the paper's
    RealFormer; a warm start from a Post-LN checkpoint raises it over its first steps."""
    if not 0.0 <= factor <= 1.0:
        raise ValueError(f"residual attention factor {factor}: expected a number from 0 to 1")
    _realformer_encoder(model).residual_attention_factor.assign(factor)


@contextlib.contextmanager
def residual_attention_factor_scope(model: keras.Model, factor) -> collections.abc.Iterator[None]:
    """Inside, the forward passes of a RealFormer `model` weigh the carried scores by `factor`
    (a float32 scalar tensor: a traced training step's, computed from its step) instead of the
    factor set on the model, which a replica's step cannot assign."""
    encoder = _realformer_encoder(model)
    encoder.factor_override = factor
    try:
        yield
    finally:
        encoder.factor_override = None


def residual_attention_factor(model: keras.Model) -> float:
    """The factor `set_residual_attention_factor` sets (1.0 as a RealFormer model is built)."""
    return float(keras.ops.convert_to_numpy(_realformer_encoder(model).residual_attention_factor))


def get_assignment_map_from_checkpoint(model_or_variables, init_checkpoint: str):
    """(assignment map {checkpoint name: variable name}, {name: 1 and name:0: 1} of the
    variables the checkpoint has), as the original returns for `tf.train.init_from_checkpoint`:
    here for a model of `modeling` (its TF1 names, `tf1_variable_map`) or a list of variables
    named with TF1 names. The one place `modeling` looks at a file: it lists the checkpoint's
    names as the original does (`bert_realformer.checkpoints` reads and writes checkpoints)."""
    import tensorflow as tf
    if isinstance(model_or_variables, keras.Model):
        names = list(tf1_variable_map(model_or_variables))
    else:
        names = [getattr(v, "path", None) or v.name.split(":")[0] for v in model_or_variables]
    available = {name for name, _ in tf.train.list_variables(init_checkpoint)}
    assignment_map = collections.OrderedDict((name, name) for name in names if name in available)
    initialized = {}
    for name in assignment_map:
        initialized[name] = 1
        initialized[f"{name}:0"] = 1
    return assignment_map, initialized
