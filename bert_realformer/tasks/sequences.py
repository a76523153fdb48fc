"""The original's input sequence for one text or a pair: `[CLS] A [SEP]` or `[CLS] A [SEP] B
[SEP]`, the pair cut to fit by dropping tokens from the end of the longer text. Works on token
strings and on ids alike. What stands between the texts of a pair is the vocabulary's
(`between`: RoBERTa's `</s> </s>`); `markers(tokenizer)` gives a tokenizer's three.

Which tokens a text cut to k keeps (`truncation`): `head` (the original) its first k; `tail` its
last k; `head_tail` its first k // 4 and its last k - k // 4 (Sun et al. 2019, "How to Fine-Tune
BERT for Text Classification?": 128 + 382 of 510 was best on IMDb and Sogou). In a pair, how
many tokens each text keeps is the original's rule; `truncation` says which.
"""

TRUNCATIONS = ("head", "tail", "head_tail")


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Pops from the end of the longer list until the pair fits (the original's rule)."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def kept(tokens: list, k: int, truncation: str = "head") -> list:
    """`tokens` cut to at most `k` items as `truncation` says (see the module docstring)."""
    if len(tokens) <= k:
        return list(tokens)
    if truncation == "head":
        return list(tokens[:k])
    head = k // 4 if truncation == "head_tail" else 0
    return list(tokens[:head]) + list(tokens[len(tokens) - (k - head):])


def markers(tokenizer, ids: bool = True) -> dict:
    """{cls, sep, between} of a tokenizer of `tokenization.vocabularies` (ids, or with `ids`
    False token strings), the keyword arguments of `pack` and `pack_windows`."""
    convert = (lambda tokens: tokenizer.convert_tokens_to_ids(list(tokens))) if ids else list
    cls, sep = convert((tokenizer.cls_token, tokenizer.sep_token))
    return {"cls": cls, "sep": sep, "between": convert(tokenizer.pair_separator)}


def pack(a: list, b: list | None, max_seq_length: int, cls, sep, truncation: str = "head",
         between: list | None = None) -> tuple[list, list[int]]:
    """(sequence, segment ids) of `[cls] A [sep] (B [sep])` in at most `max_seq_length` items
    (`between`, when given, in place of the `sep` after A in a pair): A alone is cut to
    `max_seq_length - 2`, a pair to the lengths `truncate_seq_pair` leaves, each text keeping the
    tokens `truncation` says. Segment ids are 0 up to B, 1 for B and its `sep`."""
    if b is None:
        sequence = [cls, *kept(a, max_seq_length - 2, truncation), sep]
        return sequence, [0] * len(sequence)
    between = [sep] if between is None else list(between)
    a_cut, b_cut = list(a), list(b)
    truncate_seq_pair(a_cut, b_cut, max_seq_length - 2 - len(between))
    a, b = kept(a, len(a_cut), truncation), kept(b, len(b_cut), truncation)
    return [cls, *a, *between, *b, sep], [0] * (len(a) + 1 + len(between)) + [1] * (len(b) + 1)


def window_starts(length: int, room: int, stride: int) -> list[int]:
    """Where the windows of a text of `length` tokens start, `room` tokens each, as run_squad's
    document spans: from 0, each next one `stride` further (less if the last one reaches the end
    sooner), until one ends at the text's end. One window (at 0) when the text fits."""
    starts, start = [], 0
    while True:
        starts.append(start)
        size = min(length - start, room)
        if start + size >= length:
            return starts
        start += min(size, stride)


def pack_windows(a: list, b: list | None, max_seq_length: int, stride: int, cls, sep,
                 between: list | None = None) -> list[tuple[list, list[int]]]:
    """[(sequence, segment ids)] of overlapping windows of a long text: A (the document) is cut
    into windows `stride` tokens apart, each packed as `pack` packs A; B, in pairs, is kept in
    every window (cut to half of the room left by [CLS] and the separators when the pair does not
    fit). A text that fits gives exactly `pack`'s one sequence."""
    marks = {"cls": cls, "sep": sep, "between": between}
    if b is None:
        room = max_seq_length - 2
    else:
        room = max_seq_length - 2 - (1 if between is None else len(between))
        if len(a) + len(b) <= room:
            return [pack(a, b, max_seq_length, **marks)]
        b = list(b[:max(room // 2, room - len(a))])
        room -= len(b)
    if len(a) <= room:
        return [pack(a, b, max_seq_length, **marks)]
    return [pack(a[start:start + room], b, max_seq_length, **marks) for start in window_starts(len(a), room, stride)]
