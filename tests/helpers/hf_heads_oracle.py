"""Loads each converted Hugging Face directory with transformers (PyTorch) in this fresh process
and prints JSON {head: outputs} on the inputs given on stdin, for tests/test_hf_heads.py.

stdin: {"dirs": {head: directory}, "inputs": {input_ids, attention_mask, token_type_ids}}.
"""

import json
import sys

import numpy as np
import torch
import transformers

CLASSES = {"pretraining": transformers.BertForPreTraining, "masked_lm": transformers.BertForMaskedLM,
           "classifier": transformers.BertForSequenceClassification,
           "regression": transformers.BertForSequenceClassification,
           "span": transformers.BertForQuestionAnswering, "tokens": transformers.BertForTokenClassification,
           "choice": transformers.BertForMultipleChoice}

request = json.loads(sys.stdin.read())
inputs = {k: torch.tensor(np.array(v), dtype=torch.long) for k, v in request["inputs"].items()}
results = {}
for head, directory in request["dirs"].items():
    model = CLASSES[head].from_pretrained(directory).eval()
    with torch.no_grad():
        if head == "choice":  # every example's sequence as each of 2 choices, the second reversed in batch
            pair = {k: torch.stack([v, v.flip(0)], dim=1) for k, v in inputs.items()}
            out = model(**pair)
        else:
            out = model(**inputs)
    if head == "pretraining":
        results[head] = {"mlm": out.prediction_logits.numpy().tolist(),
                         "nsp": out.seq_relationship_logits.numpy().tolist()}
    elif head == "masked_lm":
        results[head] = {"mlm": out.logits.numpy().tolist()}
    elif head == "span":
        results[head] = {"start": out.start_logits.numpy().tolist(), "end": out.end_logits.numpy().tolist()}
    else:
        results[head] = {"logits": out.logits.numpy().tolist(), "id2label": model.config.id2label,
                         "problem_type": model.config.problem_type}
    results[head]["architectures"] = model.config.architectures
print(json.dumps(results))
