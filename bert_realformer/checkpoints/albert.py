"""ALBERT's Hugging Face names (`AlbertModel` and its task classes) <-> google-research/albert's TF1 names.

ALBERT is a post-LN BERT whose embeddings are narrower (`embedding_size`), projected to the
hidden size by `encoder.embedding_hidden_mapping_in` (`bert/encoder/embedding_hidden_mapping_in`),
and whose layers share weights by groups (`num_hidden_groups`; 1 in every released model): group
G's weights are `encoder.albert_layer_groups.G.albert_layers.0`, in the original
`bert/encoder/transformer/group_G/inner_group_0` (`attention_1/self/query`, the attention's
LayerNorm `LayerNorm`, the feed-forward `ffn_1/intermediate/dense` and
`ffn_1/intermediate/output/dense`, its LayerNorm `LayerNorm_1`). The pooler is BERT's
(`albert.pooler`); the MLM head (`predictions`) is BERT's with its transform mapping to the
embedding size; the sentence-order head (`sop_classifier.classifier`) sits where BERT's
next-sentence head does (`cls/seq_relationship`, label 1: the segments swapped). The fine-tuning
heads are BERT's.
"""

import types

from bert_realformer.checkpoints.hf_family import EMBEDDINGS, Family, bert_config_fields


def _config_fields(config):
    return {**bert_config_fields(config), "embedding_size": config.embedding_width,
            "num_hidden_groups": config.num_layer_groups, "inner_group_num": 1, "classifier_dropout_prob": 0.1,
            "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}


ALBERT = Family(
    name="ALBERT", model_type="albert", prefix="albert.", encoder_class="AlbertModel",
    masked_lm=(
        ("predictions.dense.weight", "cls/predictions/transform/dense/kernel", True),
        ("predictions.dense.bias", "cls/predictions/transform/dense/bias", False),
        ("predictions.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
        ("predictions.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", False),
        ("predictions.bias", "cls/predictions/output_bias", False),
    ),
    masked_lm_class="AlbertForMaskedLM",
    next_sentence=(("sop_classifier.classifier.weight", "cls/seq_relationship/output_weights", False),
                   ("sop_classifier.classifier.bias", "cls/seq_relationship/output_bias", False)),
    pretraining_class="AlbertForPreTraining",
    tied=types.MappingProxyType({"predictions.decoder.weight": "bert/embeddings/word_embeddings",
                                 "predictions.decoder.bias": "cls/predictions/output_bias"}),
    task_heads=types.MappingProxyType({
        "AlbertForSequenceClassification": (("classifier.weight", "output_weights", False),
                                            ("classifier.bias", "output_bias", False)),
        "AlbertForQuestionAnswering": (("qa_outputs.weight", "cls/squad/output_weights", False),
                                       ("qa_outputs.bias", "cls/squad/output_bias", False)),
        "AlbertForTokenClassification": (("classifier.weight", "cls/ner/output_weights", False),
                                         ("classifier.bias", "cls/ner/output_bias", False)),
        "AlbertForMultipleChoice": (("classifier.weight", "cls/multiple_choice/output_weights", False),
                                    ("classifier.bias", "cls/multiple_choice/output_bias", False)),
    }),
    config_fields=_config_fields,
    without_pooler=frozenset({"AlbertForMaskedLM", "AlbertForQuestionAnswering", "AlbertForTokenClassification"}),
    embeddings=(*EMBEDDINGS,
                ("encoder.embedding_hidden_mapping_in.weight", "bert/encoder/embedding_hidden_mapping_in/kernel", True),
                ("encoder.embedding_hidden_mapping_in.bias", "bert/encoder/embedding_hidden_mapping_in/bias", False)),
    layer_scope="encoder.albert_layer_groups.{}.albert_layers.0",
    tf1_layer_scope="bert/encoder/transformer/group_{}/inner_group_0",
    layer_parts=(
        ("attention.query.weight", "attention_1/self/query/kernel", True),
        ("attention.query.bias", "attention_1/self/query/bias", False),
        ("attention.key.weight", "attention_1/self/key/kernel", True),
        ("attention.key.bias", "attention_1/self/key/bias", False),
        ("attention.value.weight", "attention_1/self/value/kernel", True),
        ("attention.value.bias", "attention_1/self/value/bias", False),
        ("attention.dense.weight", "attention_1/output/dense/kernel", True),
        ("attention.dense.bias", "attention_1/output/dense/bias", False),
        ("attention.LayerNorm.weight", "LayerNorm/gamma", False),
        ("attention.LayerNorm.bias", "LayerNorm/beta", False),
        ("ffn.weight", "ffn_1/intermediate/dense/kernel", True),
        ("ffn.bias", "ffn_1/intermediate/dense/bias", False),
        ("ffn_output.weight", "ffn_1/intermediate/output/dense/kernel", True),
        ("ffn_output.bias", "ffn_1/intermediate/output/dense/bias", False),
        ("full_layer_layer_norm.weight", "LayerNorm_1/gamma", False),
        ("full_layer_layer_norm.bias", "LayerNorm_1/beta", False),
    ),
    pooler=(("pooler.weight", "bert/pooler/dense/kernel", True), ("pooler.bias", "bert/pooler/dense/bias", False)),
    wordpiece=False,  # SentencePiece (spiece.model)
)
