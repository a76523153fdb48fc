"""transformers' RoBERTa, DistilBERT or ALBERT (PyTorch) in a fresh process, for tests/test_hf_families.py.

stdin: {"family": "roberta", "distilbert" or "albert", "make": directory, "inputs": {input_ids,
attention_mask}, optionally "vocab_size" (99)} saves a randomly initialised small model of each
of the family's classes under directory/CLASS (every weight drawn, biases and LayerNorms too; with
"as_initialised" true, as transformers initialises them);
{"family": ..., "load": directory, "inputs": ...} loads directory/CLASS instead. Either prints
JSON {CLASS: outputs} on those inputs (multiple choice: each example as the first of 2 choices,
the batch reversed as the second; ALBERT's pretraining class: its MLM and sentence-order logits).
The ALBERT has 3 layers in 2 groups (layers 0 and 1 share weights) and embeddings of 16 for 32.
"""

import json
import os
import sys

import numpy as np
import torch
import transformers

HEADS = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
         "ForMultipleChoice")
FAMILIES = {
    "roberta": ("Roberta", lambda vocab_size: transformers.RobertaConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=40, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        layer_norm_eps=1e-5)),
    "distilbert": ("DistilBert", lambda vocab_size: transformers.DistilBertConfig(
        vocab_size=vocab_size, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=40)),
    "albert": ("Albert", lambda vocab_size: transformers.AlbertConfig(
        vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_hidden_groups=2,
        num_attention_heads=4, intermediate_size=37, max_position_embeddings=40, type_vocab_size=2,
        hidden_act="gelu_new")),
}
EXTRA_HEADS = {"albert": ("ForPreTraining",)}
NUM_LABELS = {"ForTokenClassification": 5, "ForQuestionAnswering": 2, "ForPreTraining": 2}

request = json.loads(sys.stdin.read())
inputs = {k: torch.tensor(np.array(v), dtype=torch.long) for k, v in request["inputs"].items()}
class_prefix, make_config = FAMILIES[request["family"]]
results = {}
for index, head in enumerate(HEADS + EXTRA_HEADS.get(request["family"], ())):
    name = class_prefix + head
    cls = getattr(transformers, name)
    if "make" in request:
        config = make_config(request.get("vocab_size", 99))
        config.num_labels = NUM_LABELS.get(head, 3)
        torch.manual_seed(index)
        model = cls(config).eval()
        with torch.no_grad():
            for parameter in model.parameters() if not request.get("as_initialised") else ():
                parameter.normal_(0.0, 0.3)
        model.save_pretrained(os.path.join(request["make"], name))
    else:
        model = cls.from_pretrained(os.path.join(request["load"], name)).eval()
    with torch.no_grad():
        if head == "ForMultipleChoice":
            out = model(**{k: torch.stack([v, v.flip(0)], dim=1) for k, v in inputs.items()})
        else:
            out = model(**inputs)
    if head == "Model":
        results[name] = {"sequence": out.last_hidden_state.numpy().tolist()}
        if getattr(out, "pooler_output", None) is not None:
            results[name]["pooled"] = out.pooler_output.numpy().tolist()
    elif head == "ForPreTraining":
        results[name] = {"logits": out.prediction_logits.numpy().tolist(), "sop": out.sop_logits.numpy().tolist()}
    elif head == "ForQuestionAnswering":
        results[name] = {"start": out.start_logits.numpy().tolist(), "end": out.end_logits.numpy().tolist()}
    else:
        results[name] = {"logits": out.logits.numpy().tolist()}
    results[name]["architectures"] = model.config.architectures
print(json.dumps(results))
