"""transformers' RoBERTa (PyTorch) in a fresh process, for tests/test_roberta.py.

stdin: {"make": directory, "inputs": {input_ids, attention_mask}} saves a randomly initialised
small RoBERTa of each class under directory/CLASS (every weight drawn, biases and LayerNorms
too); {"load": directory, "inputs": ...} loads directory/CLASS instead. Either prints JSON
{CLASS: outputs} on those inputs (multiple choice: each example as the first of 2 choices, the
batch reversed as the second).
"""

import json
import os
import sys

import numpy as np
import torch
import transformers

CLASSES = ("RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
           "RobertaForTokenClassification", "RobertaForQuestionAnswering", "RobertaForMultipleChoice")

NUM_LABELS = {"RobertaForTokenClassification": 5, "RobertaForQuestionAnswering": 2}

request = json.loads(sys.stdin.read())
inputs = {k: torch.tensor(np.array(v), dtype=torch.long) for k, v in request["inputs"].items()}
results = {}
for index, name in enumerate(CLASSES):
    cls = getattr(transformers, name)
    if "make" in request:
        config = transformers.RobertaConfig(
            vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=40, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
            layer_norm_eps=1e-5, num_labels=NUM_LABELS.get(name, 3))
        torch.manual_seed(index)
        model = cls(config).eval()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.normal_(0.0, 0.3)
        directory = os.path.join(request["make"], name)
        model.save_pretrained(directory)
    else:
        model = cls.from_pretrained(os.path.join(request["load"], name)).eval()
    with torch.no_grad():
        if name == "RobertaForMultipleChoice":
            out = model(**{k: torch.stack([v, v.flip(0)], dim=1) for k, v in inputs.items()})
        else:
            out = model(**inputs)
    if name == "RobertaModel":
        results[name] = {"sequence": out.last_hidden_state.numpy().tolist(),
                         "pooled": out.pooler_output.numpy().tolist()}
    elif name == "RobertaForQuestionAnswering":
        results[name] = {"start": out.start_logits.numpy().tolist(), "end": out.end_logits.numpy().tolist()}
    else:
        results[name] = {"logits": out.logits.numpy().tolist()}
    results[name]["architectures"] = model.config.architectures
print(json.dumps(results))
