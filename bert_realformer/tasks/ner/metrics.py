"""Entity-level precision, recall and F1, and token accuracy.

A tag is `O` or `<prefix>-<type>` with prefix B, I, E or S (IOB1, IOB2/BIO and BIOES alike).
A chunk starts at B- or S-, at I-/E- after O, E- or S-, and wherever the type changes (so an
I-X that does not continue X starts a chunk); it ends before B-/S-/O after B-/I-, after E-/S-,
and before a change of type. A predicted chunk is correct when a gold chunk has the same start,
end and type.

For IOB1 and IOB2 these are the rules of `conlleval` (the CoNLL-2000 Perl script), and the
counts equal its counts. For BIOES they are the scheme's own (S- is a one-token chunk, E- ends
one), which conlleval lacks: it has no S- rule and no end at E- before B-, so it merges adjacent
chunks (`B-X E-X B-X E-X` is one chunk to it, two here) and its BIOES scores differ from these.
"""

import collections

REPORTED = ("f1", "precision", "recall", "accuracy")  # eval_results.txt's, the main metric first


def _split(tag):
    if tag == "O" or "-" not in tag:
        return "O", ""
    prefix, kind = tag.split("-", 1)
    return prefix, kind


def _ends(previous, current):
    (prev_prefix, prev_type), (prefix, kind) = previous, current
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix != "O" and prev_type != kind


def _starts(previous, current):
    (prev_prefix, prev_type), (prefix, kind) = previous, current
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix != "O" and prev_type != kind


def chunks(tags):
    """{(type, first index, last index)} of a sentence's tags."""
    found, start, previous = set(), None, ("O", "")
    for index, tag in enumerate(list(tags) + ["O"]):
        current = _split(tag)
        if start is not None and _ends(previous, current):
            found.add((previous[1], start, index - 1))
            start = None
        if _starts(previous, current):
            start = index
        previous = current
    return found


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_metrics(gold_sentences, predicted_sentences):
    """Metrics over sentences of tags (lists of equal lengths): `precision`, `recall`, `f1`
    (micro over types), `accuracy` (tokens), and `<TYPE>_precision`, `<TYPE>_recall`,
    `<TYPE>_f1`, `<TYPE>_support` (gold chunks) for every type seen in either."""
    counts = collections.defaultdict(lambda: [0, 0, 0])  # type -> [correct, predicted, gold]
    tokens = right = 0
    for gold_tags, predicted_tags in zip(gold_sentences, predicted_sentences, strict=True):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"{len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
        tokens += len(gold_tags)
        right += sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True))
        gold, predicted = chunks(gold_tags), chunks(predicted_tags)
        for kind, *_ in predicted:
            counts[kind][1] += 1
        for kind, *_ in gold:
            counts[kind][2] += 1
        for kind, *_ in gold & predicted:
            counts[kind][0] += 1
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    precision, recall, f1 = _prf(*totals)
    result = {"precision": precision, "recall": recall, "f1": f1,
              "accuracy": right / tokens if tokens else 0.0}
    for kind in sorted(counts):
        p, r, f = _prf(*counts[kind])
        result.update({f"{kind}_precision": p, f"{kind}_recall": r, f"{kind}_f1": f,
                       f"{kind}_support": counts[kind][2]})
    return result
