"""The original's input sequence for one text or a pair: `[CLS] A [SEP]` or `[CLS] A [SEP] B
[SEP]`, the pair cut to fit by dropping tokens from the end of the longer text. Works on token
strings and on ids alike."""


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Pops from the end of the longer list until the pair fits (the original's rule)."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def pack(a: list, b: list | None, max_seq_length: int, cls, sep) -> tuple[list, list[int]]:
    """(sequence, segment ids) of `[cls] A [sep] (B [sep])` in at most `max_seq_length` items:
    A alone is cut to `max_seq_length - 2`, a pair as `truncate_seq_pair` (on copies). Segment
    ids are 0 up to the first `sep`, 1 for B and its `sep`."""
    a = list(a)
    if b is None:
        del a[max_seq_length - 2:]
        sequence = [cls, *a, sep]
        return sequence, [0] * len(sequence)
    b = list(b)
    truncate_seq_pair(a, b, max_seq_length - 3)
    return [cls, *a, sep, *b, sep], [0] * (len(a) + 2) + [1] * (len(b) + 1)
