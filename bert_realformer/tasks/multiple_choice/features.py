"""Multiple-choice features: each choice is its own sequence `[CLS] context [SEP]
start-of-ending + ending [SEP]` (truncated as the original classifier truncates a pair);
examples with fewer choices than others are padded with choices that cannot be chosen.
"""

from __future__ import annotations

import numpy as np

from bert_realformer.tasks.sequences import markers, pack


def choice_arrays(examples, tokenizer, max_seq_length):
    """{input_ids, input_mask, segment_ids: [N, C, S], choice_mask: [N, C], label_ids: [N]}
    with C the most choices of any example (label -1 where there is none)."""
    num_choices = max(len(e.choices) for e in examples)
    shape = (len(examples), num_choices, max_seq_length)
    arrays = {name: np.zeros(shape, "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    arrays["choice_mask"] = np.zeros(shape[:2], "int32")
    arrays["label_ids"] = np.array([-1 if e.label is None else e.label for e in examples], "int32")
    marks = markers(tokenizer)
    for n, example in enumerate(examples):
        context = tokenizer.tokenize_to_ids(example.context)
        for c, choice in enumerate(example.choices):
            ending = tokenizer.tokenize_to_ids(f"{example.start} {choice}".strip())
            ids, segments = pack(context, ending, max_seq_length, **marks)
            arrays["input_ids"][n, c, :len(ids)] = ids
            arrays["input_mask"][n, c, :len(ids)] = 1
            arrays["segment_ids"][n, c, :len(ids)] = segments
            arrays["choice_mask"][n, c] = 1
    return arrays
