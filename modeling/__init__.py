"""BERT, Pre-LN and RealFormer in backend-agnostic Keras 3 (see README.md, "Public API")."""

from modeling import crf
from modeling.activations import gelu, gelu_exact, get_activation
from modeling.attention import AttentionLayer, attention_layer
from modeling.bert import WORD_EMBEDDING_DELTA, BertEmbeddings, BertModel
from modeling.config import BertConfig, ConfigError
from modeling.encoder import TransformerBlock, TransformerEncoder
from modeling.functional import (
    create_attention_mask_from_input_mask,
    dropout,
    embedding_lookup,
    embedding_postprocessor,
    layer_norm,
    layer_norm_and_dropout,
    transformer_model,
)
from modeling.heads import (
    ChoiceHead,
    ClassifierHead,
    MaskedLMHead,
    NextSentenceHead,
    SpanHead,
    TokenClassifierHead,
    gather_indexes,
    masked_lm_loss,
    next_sentence_loss,
)
from modeling.layers import (
    LayerNorm,
    assert_rank,
    create_initializer,
    get_shape_list,
    reshape_from_matrix,
    reshape_to_matrix,
    sentence_embedding,
)
from modeling.lora import enable_lora, weight_variables, without_lora
from modeling.models import (
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
    encoder_inputs,
    freeze_encoder,
    get_assignment_map_from_checkpoint,
    pretraining_losses,
    residual_attention_factor,
    residual_attention_factor_scope,
    set_residual_attention_factor,
    tf1_variable_map,
)
from modeling.randomness import Dropout, random_stream, second_pass

__all__ = [
    "crf",
    "gelu", "gelu_exact", "get_activation",
    "AttentionLayer", "attention_layer",
    "BertEmbeddings", "BertModel", "WORD_EMBEDDING_DELTA",
    "tf1_variable_map", "weight_variables",
    "enable_lora", "without_lora", "freeze_encoder",
    "BertConfig", "ConfigError",
    "TransformerBlock", "TransformerEncoder",
    "create_attention_mask_from_input_mask", "dropout", "embedding_lookup", "embedding_postprocessor",
    "layer_norm", "layer_norm_and_dropout", "transformer_model",
    "ChoiceHead", "ClassifierHead", "MaskedLMHead", "NextSentenceHead", "SpanHead", "TokenClassifierHead",
    "gather_indexes", "masked_lm_loss", "next_sentence_loss",
    "LayerNorm", "create_initializer",
    "assert_rank", "get_assignment_map_from_checkpoint", "get_shape_list", "reshape_from_matrix",
    "reshape_to_matrix", "sentence_embedding",
    "BertClassifier", "BertMultipleChoice", "BertPretrainer", "BertSpanLabeler", "BertTokenClassifier",
    "encoder_inputs", "pretraining_losses", "residual_attention_factor",
    "residual_attention_factor_scope", "set_residual_attention_factor",
    "Dropout", "random_stream", "second_pass",
]
