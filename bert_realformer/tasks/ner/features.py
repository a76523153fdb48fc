"""NER sentences -> fixed-length windows of WordPieces, one prediction per input token.

Each token (word, or Chinese character) is tokenized on its own; a token that tokenizes to
nothing (a control character) becomes `[UNK]`, so it still gets a prediction. A sentence is cut
into consecutive, non-overlapping windows of whole tokens that fit `[CLS] ... [SEP]` in
`max_seq_length`; a single token longer than that keeps its first pieces. Every token of the
input lands in exactly one window, and is scored at its first WordPiece.

Arrays, N windows, S = max_seq_length: `input_ids`, `input_mask`, `segment_ids` [N, S];
`word_positions` [N, S] (the first piece of the window's w-th token, 0 past its tokens),
`word_mask` [N, S], and with labels `label_ids` [N, S] (0 past the tokens).
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Window:
    """Tokens `start` to `start + length - 1` of sentence `sentence`."""
    sentence: int
    start: int
    length: int


def _pieces(tokenizer, token, cache):
    ids = cache.get(token)
    if ids is None:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize_word(token)) or [tokenizer.vocab[tokenizer.unk_token]]
        cache[token] = ids
    return ids


def sentence_windows(sentences, tokenizer, max_seq_length, label_map=None):
    """(arrays, [Window]) for `sentences` (`ner_data.Sentence`), in order. `label_map`
    ({tag: id}) adds `label_ids` (the sentences must be tagged)."""
    budget = max_seq_length - 2
    cls_id, sep_id = tokenizer.vocab[tokenizer.cls_token], tokenizer.vocab[tokenizer.sep_token]
    cache, rows, windows = {}, [], []
    for index, sentence in enumerate(sentences):
        pieces = [_pieces(tokenizer, token, cache)[:budget] for token in sentence.tokens]
        start = 0
        while start < len(pieces):
            end, used = start, 0
            while end < len(pieces) and used + len(pieces[end]) <= budget:
                used += len(pieces[end])
                end += 1
            windows.append(Window(index, start, end - start))
            rows.append((pieces[start:end], sentence.tags[start:end] if label_map is not None else None))
            start = end
    shape = (len(rows), max_seq_length)
    arrays = {name: np.zeros(shape, "int32") for name in
              ("input_ids", "input_mask", "segment_ids", "word_positions", "word_mask")}
    if label_map is not None:
        arrays["label_ids"] = np.zeros(shape, "int32")
    for row, (word_pieces, tags) in enumerate(rows):
        ids, position = [cls_id], 1
        for w, word in enumerate(word_pieces):
            arrays["word_positions"][row, w] = position
            ids.extend(word)
            position += len(word)
        ids.append(sep_id)
        arrays["input_ids"][row, :len(ids)] = ids
        arrays["input_mask"][row, :len(ids)] = 1
        arrays["word_mask"][row, :len(word_pieces)] = 1
        if tags is not None:
            arrays["label_ids"][row, :len(tags)] = [label_map[tag] for tag in tags]
    return arrays, windows


def sentence_tags(windows, window_tags, sentences):
    """Per-window predicted tag lists -> one tag list per sentence, in order."""
    out = [[None] * len(sentence.tokens) for sentence in sentences]
    for window, tags in zip(windows, window_tags, strict=True):
        out[window.sentence][window.start:window.start + window.length] = tags[:window.length]
    return out
