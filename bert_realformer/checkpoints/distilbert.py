"""DistilBERT's Hugging Face names (`DistilBertModel` and its task classes) <-> the original TF1 names.

DistilBERT is a post-LN BERT without token types (`type_vocab_size: 0`) and without a pooler, its
layers under other names (`distilbert.transformer.layer.N`: `attention.q_lin` is BERT's query,
`sa_layer_norm` the attention's LayerNorm, `ffn.lin1` / `ffn.lin2` the intermediate and output
denses). Its classifier and multiple-choice heads put `pre_classifier` then a ReLU on the first
token: BERT's pooler with another activation (`pooler_activation: "relu"`), so they map onto
`bert/pooler/dense`; its MLM head (`vocab_transform`, `vocab_layer_norm`, `vocab_projector`, tied
to the word embeddings) is `cls/predictions`. It has no next-sentence head.
"""

import types

from bert_realformer.checkpoints.hf_family import OURS_TO_HF_ACTIVATION, Family

_POOLER = (("pre_classifier.weight", "bert/pooler/dense/kernel", True),
           ("pre_classifier.bias", "bert/pooler/dense/bias", False))


# DistilBERT's config.json names -> the original's.
CONFIG_NAMES = types.MappingProxyType({
    "vocab_size": "vocab_size", "dim": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "hidden_dim": "intermediate_size", "activation": "hidden_act",
    "dropout": "hidden_dropout_prob", "attention_dropout": "attention_probs_dropout_prob",
    "max_position_embeddings": "max_position_embeddings", "initializer_range": "initializer_range"})


def _config_fields(config):
    fields = {theirs: getattr(config, ours) for theirs, ours in CONFIG_NAMES.items()}
    return {**fields, "activation": OURS_TO_HF_ACTIVATION[config.hidden_act.lower()], "sinusoidal_pos_embds": False,
            "pad_token_id": 0}


DISTILBERT = Family(
    name="DistilBERT", model_type="distilbert", prefix="distilbert.", encoder_class="DistilBertModel",
    masked_lm=(
        ("vocab_transform.weight", "cls/predictions/transform/dense/kernel", True),
        ("vocab_transform.bias", "cls/predictions/transform/dense/bias", False),
        ("vocab_layer_norm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
        ("vocab_layer_norm.bias", "cls/predictions/transform/LayerNorm/beta", False),
        ("vocab_projector.bias", "cls/predictions/output_bias", False),
    ),
    masked_lm_class="DistilBertForMaskedLM",
    tied=types.MappingProxyType({"vocab_projector.weight": "bert/embeddings/word_embeddings"}),
    task_heads=types.MappingProxyType({
        "DistilBertForSequenceClassification": (("classifier.weight", "output_weights", False),
                                                ("classifier.bias", "output_bias", False), *_POOLER),
        "DistilBertForQuestionAnswering": (("qa_outputs.weight", "cls/squad/output_weights", False),
                                           ("qa_outputs.bias", "cls/squad/output_bias", False)),
        "DistilBertForTokenClassification": (("classifier.weight", "cls/ner/output_weights", False),
                                             ("classifier.bias", "cls/ner/output_bias", False)),
        "DistilBertForMultipleChoice": (("classifier.weight", "cls/multiple_choice/output_weights", False),
                                        ("classifier.bias", "cls/multiple_choice/output_bias", False), *_POOLER),
    }),
    config_fields=_config_fields,
    pooler_in_head=frozenset({"DistilBertForSequenceClassification", "DistilBertForMultipleChoice"}),
    without_pooler=frozenset({"DistilBertModel", "DistilBertForMaskedLM", "DistilBertForQuestionAnswering",
                              "DistilBertForTokenClassification"}),
    embeddings=(
        ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
        ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
        ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
        ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ),
    layer_scope="transformer.layer.{}",
    layer_parts=(
        ("attention.q_lin.weight", "attention/self/query/kernel", True),
        ("attention.q_lin.bias", "attention/self/query/bias", False),
        ("attention.k_lin.weight", "attention/self/key/kernel", True),
        ("attention.k_lin.bias", "attention/self/key/bias", False),
        ("attention.v_lin.weight", "attention/self/value/kernel", True),
        ("attention.v_lin.bias", "attention/self/value/bias", False),
        ("attention.out_lin.weight", "attention/output/dense/kernel", True),
        ("attention.out_lin.bias", "attention/output/dense/bias", False),
        ("sa_layer_norm.weight", "attention/output/LayerNorm/gamma", False),
        ("sa_layer_norm.bias", "attention/output/LayerNorm/beta", False),
        ("ffn.lin1.weight", "intermediate/dense/kernel", True),
        ("ffn.lin1.bias", "intermediate/dense/bias", False),
        ("ffn.lin2.weight", "output/dense/kernel", True),
        ("ffn.lin2.bias", "output/dense/bias", False),
        ("output_layer_norm.weight", "output/LayerNorm/gamma", False),
        ("output_layer_norm.bias", "output/LayerNorm/beta", False),
    ),
    pooler=(),
)
