"""BERT, Pre-LN and RealFormer in backend-agnostic Keras 3 (see README.md, "Public API")."""

from modeling.activations import gelu, gelu_exact, get_activation
from modeling.attention import AttentionLayer, attention_layer
from modeling.bert import BertEmbeddings, BertModel
from modeling.checkpoints import (CheckpointError, LoadReport, load_tf1_checkpoint,
                                  read_tf1_checkpoint, save_tf1_checkpoint, tf1_variable_map,
                                  write_tf1_checkpoint)
from modeling.config import BertConfig, ConfigError
from modeling.encoder import TransformerBlock, TransformerEncoder
from modeling import crf  # noqa: F401  (modeling.crf)
from modeling.heads import (ChoiceHead, ClassifierHead, MaskedLMHead, NextSentenceHead, SpanHead,
                            TokenClassifierHead,
                            classification_loss, gather_indexes, masked_lm_loss,
                            next_sentence_loss, span_loss)
from modeling import huggingface  # noqa: F401  (modeling.huggingface)
from modeling.layers import LayerNorm
from modeling.randomness import Dropout, random_stream
from modeling.models import (BertClassifier, BertMultipleChoice, BertPretrainer, BertSpanLabeler,
                             BertTokenClassifier, encoder_inputs, pretraining_losses)
