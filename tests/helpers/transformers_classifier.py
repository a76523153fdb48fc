"""A Hugging Face classifier directory run by transformers itself in a fresh process: its own
tokenizer on raw texts (or pairs of texts), its own model (`AutoModelForSequenceClassification`)."""

import json
import sys

import numpy as np
from helpers import script_processes

_CODE = """import json, sys, torch, transformers
d, max_length = sys.argv[1], int(sys.argv[2])
t = transformers.AutoTokenizer.from_pretrained(d)
m = transformers.AutoModelForSequenceClassification.from_pretrained(d).eval()
texts = json.loads(sys.stdin.read())
texts = list(zip(*texts)) if isinstance(texts[0], list) else [texts]
x = t(*texts, max_length=max_length, truncation=True, padding='max_length', return_tensors='pt')
with torch.no_grad():
    p = torch.softmax(m(**x).logits, -1)
print(json.dumps({'p': p.numpy().tolist(), 'id2label': m.config.id2label, 'class': type(m).__name__}))
"""


def transformers_probabilities(directory, texts, max_length):
    """(probabilities [N, labels], the config's id2label, the model's class name) of `texts` (N
    strings, or N (text, second text) pairs)."""
    request = json.dumps([text if isinstance(text, str) else list(text) for text in texts])
    served = script_processes.run([sys.executable, "-c", _CODE, str(directory), str(max_length)],
                                  input=request, capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    theirs = json.loads(served.stdout.strip().splitlines()[-1])
    return np.array(theirs["p"]), theirs["id2label"], theirs["class"]
