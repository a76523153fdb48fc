"""Raw text lines -> BERT inputs, as the original extract_features.py reads them: one example
per line, `text_a` or `text_a ||| text_b`, `[CLS] A [SEP] (B [SEP])`, the pair truncated as the
classifier truncates it. Used by extract_features.py and analyze_attention.py.
"""

import re

import numpy as np

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.tasks.sequences import markers, pack
from bert_realformer.text_files import read_lines

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_text_examples(path, option="input_file"):
    """[(unique_id, text_a, text_b or None)] from the lines of `path`."""
    if not storage.isfile(path):
        raise InputError(f"{option}={path}: no such file", options=(option,))
    examples = []
    for _, line in read_lines(path):
        line = line.strip()
        match = _PAIR.match(line)
        text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
        examples.append((len(examples), text_a, text_b))
    if not examples:
        raise InputError(f"{option}={path} is empty: expected one text (or `A ||| B` pair) per line",
                         options=(option,))
    return examples


def text_features(examples, tokenizer, max_seq_length):
    """(tokens of each example, {input_ids, input_mask, token_type_ids: int32 [N, S]})."""
    all_tokens = []
    arrays = {name: np.zeros((len(examples), max_seq_length), "int32")
              for name in ("input_ids", "input_mask", "token_type_ids")}
    for row, (_, text_a, text_b) in enumerate(examples):
        b = tokenizer.tokenize(text_b) if text_b is not None else None
        tokens, segments = pack(tokenizer.tokenize(text_a), b, max_seq_length, **markers(tokenizer, ids=False))
        all_tokens.append(tokens)
        arrays["input_ids"][row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
        arrays["input_mask"][row, :len(tokens)] = 1
        arrays["token_type_ids"][row, :len(tokens)] = segments
    return all_tokens, arrays
