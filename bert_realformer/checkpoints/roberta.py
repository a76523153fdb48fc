"""RoBERTa's Hugging Face names (`RobertaModel` and its task classes) <-> the original TF1 names.

The encoder is BERT's under `roberta.`; RoBERTa's configs start positions past the padding index
(`position_offset`: `pad_token_id` + 1), use one token type and LayerNorm epsilon 1e-5. Its heads:
`lm_head` is BERT's MLM head (`cls/predictions`) under other names (its activation is always the
exact GELU, RoBERTa's `hidden_act`); the classifier (`classifier.dense` then `classifier.out_proj`,
tanh between, on the first token) is BERT's pooler then the original classifier's output layer,
so it maps onto `bert/pooler/dense` and `output_weights`; question answering, token classification
and multiple choice are BERT's heads. RoBERTa has no next-sentence head.
"""

import types

from bert_realformer.checkpoints.hf_family import Family, bert_config_fields

ROBERTA = Family(
    name="RoBERTa", model_type="roberta", prefix="roberta.", encoder_class="RobertaModel",
    masked_lm=(
        ("lm_head.dense.weight", "cls/predictions/transform/dense/kernel", True),
        ("lm_head.dense.bias", "cls/predictions/transform/dense/bias", False),
        ("lm_head.layer_norm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
        ("lm_head.layer_norm.bias", "cls/predictions/transform/LayerNorm/beta", False),
        ("lm_head.bias", "cls/predictions/output_bias", False),
    ),
    masked_lm_class="RobertaForMaskedLM",
    tied=types.MappingProxyType({"lm_head.decoder.weight": "bert/embeddings/word_embeddings",
                                 "lm_head.decoder.bias": "cls/predictions/output_bias"}),
    task_heads=types.MappingProxyType({
        "RobertaForSequenceClassification": (
            ("classifier.out_proj.weight", "output_weights", False),
            ("classifier.out_proj.bias", "output_bias", False),
            ("classifier.dense.weight", "bert/pooler/dense/kernel", True),
            ("classifier.dense.bias", "bert/pooler/dense/bias", False)),
        "RobertaForQuestionAnswering": (("qa_outputs.weight", "cls/squad/output_weights", False),
                                        ("qa_outputs.bias", "cls/squad/output_bias", False)),
        "RobertaForTokenClassification": (("classifier.weight", "cls/ner/output_weights", False),
                                          ("classifier.bias", "cls/ner/output_bias", False)),
        "RobertaForMultipleChoice": (("classifier.weight", "cls/multiple_choice/output_weights", False),
                                     ("classifier.bias", "cls/multiple_choice/output_bias", False)),
    }),
    config_fields=lambda config: {**bert_config_fields(config), "pad_token_id": config.position_offset - 1,
                                  "bos_token_id": 0, "eos_token_id": 2},
    pooler_in_head=frozenset({"RobertaForSequenceClassification"}),
    wordpiece=False,  # byte-level BPE (vocab.json, merges.txt)
    without_pooler=frozenset({"RobertaForMaskedLM", "RobertaForQuestionAnswering", "RobertaForTokenClassification"}),
)
