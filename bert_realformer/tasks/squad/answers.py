"""SQuAD answers from the span logits, as the original's: the n-best start/end pairs (end >=
start, at most `max_answer_length`, start in its max-context window), the null answer for v2.0
(the lowest null score over windows; predicted when score_null - best_non_null > threshold),
and the text mapped back to the original characters (`get_final_text`).
"""

from __future__ import annotations

import collections
import logging
import math

from bert_realformer.tasks.squad.reading import join_words
from tokenization.full import join_wordpieces
from tokenization.reference import BasicTokenizer

logger = logging.getLogger(__name__)


def _best_indexes(logits, n_best_size):
    return [i for i, _ in sorted(enumerate(logits), key=lambda x: x[1], reverse=True)[:n_best_size]]


def _softmax(scores):
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _strip_spaces(text):
    chars, ns_to_s = [], {}
    for i, c in enumerate(text):
        if c == " ":
            continue
        ns_to_s[len(chars)] = i
        chars.append(c)
    return "".join(chars), ns_to_s


def get_final_text(pred_text, orig_text, do_lower_case):
    """Projects the normalised WordPiece text `pred_text` back onto `orig_text` (the original
    words it came from), keeping the original's casing and punctuation; `orig_text` when the
    alignment fails (logged at INFO, which run_squad.py's --verbose_logging shows)."""
    tok_text = " ".join(BasicTokenizer(do_lower_case=do_lower_case).tokenize(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        logger.info("unable to find %r in %r: the answer is the whole original span", pred_text, orig_text)
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        logger.info("lengths differ after stripping spaces: %r vs %r", orig_ns, tok_ns)
        return orig_text
    tok_s_to_ns = {s: ns for ns, s in tok_ns_to_s.items()}
    orig_start = orig_ns_to_s.get(tok_s_to_ns[start]) if start in tok_s_to_ns else None
    orig_end = orig_ns_to_s.get(tok_s_to_ns[end]) if end in tok_s_to_ns else None
    if orig_start is None or orig_end is None:
        logger.info("could not map %r back onto %r", pred_text, orig_text)
        return orig_text
    return orig_text[orig_start:orig_end + 1]


RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


Prelim = collections.namedtuple("Prelim", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])


def compute_predictions(examples, features, results, n_best_size, max_answer_length, do_lower_case,
                        version_2_with_negative=False, null_score_diff_threshold=0.0, decode=None):
    """Returns (predictions {qid: text}, nbest {qid: [entries]}, null odds {qid: diff} (v2.0)).
    `decode`: the text of a span's tokens (the tokenizer's `decode`; None: WordPiece's rule)."""
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    result_of = {r.unique_id: r for r in results}
    predictions, nbest_json, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        example_features = by_example[example_index]
        prelim, null = _candidate_spans(example_features, result_of, n_best_size, max_answer_length,
                                        version_2_with_negative)
        entries = _nbest_entries(example, example_features, prelim, null, n_best_size, do_lower_case,
                                 decode or join_wordpieces)
        nbest_json[example.qas_id] = entries
        if not version_2_with_negative:
            predictions[example.qas_id] = entries[0]["text"]
            continue
        best_non_null = next((e for e in entries if e["text"]), None)
        if best_non_null is None:
            diff = 1e9  # every candidate was the null answer
        else:
            diff = null.start_logit + null.end_logit - best_non_null["start_logit"] - best_non_null["end_logit"]
        null_odds[example.qas_id] = float(diff)
        predictions[example.qas_id] = "" if diff > null_score_diff_threshold else best_non_null["text"]
    return predictions, nbest_json, null_odds


def _candidate_spans(example_features, result_of, n_best_size, max_answer_length, version_2_with_negative):
    """(the example's candidate answers `Prelim` best first, the null answer or None): the
    `n_best_size` best starts and ends of every window that make a span inside the window's
    document part, at its maximum-context positions, at most `max_answer_length` long; with
    v2.0, the null answer of the window with the lowest null score (also a candidate)."""
    prelim, null = [], None
    for feature_index, feature in enumerate(example_features):
        result = result_of[feature.unique_id]
        if version_2_with_negative:
            candidate = Prelim(feature_index, 0, 0, result.start_logits[0], result.end_logits[0])
            if null is None or candidate.start_logit + candidate.end_logit < null.start_logit + null.end_logit:
                null = candidate
        for start in _best_indexes(result.start_logits, n_best_size):
            for end in _best_indexes(result.end_logits, n_best_size):
                if start >= len(feature.tokens) or end >= len(feature.tokens):
                    continue
                if start not in feature.token_to_orig_map or end not in feature.token_to_orig_map:
                    continue
                if not feature.token_is_max_context.get(start, False) or end < start:
                    continue
                if end - start + 1 > max_answer_length:
                    continue
                prelim.append(Prelim(feature_index, start, end, result.start_logits[start], result.end_logits[end]))
    if null is not None:
        prelim.append(null)
    prelim.sort(key=lambda p: p.start_logit + p.end_logit, reverse=True)
    return prelim, null


def _nbest_entries(example, example_features, prelim, null, n_best_size, do_lower_case, decode):
    """The n best distinct answer texts (the null answer "" included with v2.0) with their
    probabilities (a softmax over start + end logits) and logits."""
    seen, nbest = set(), []
    for p in prelim:
        if len(nbest) >= n_best_size:
            break
        text = (_answer_text(example, example_features[p.feature_index], p, do_lower_case, decode)
                if p.start_index > 0 else "")
        if text in seen and p.start_index > 0:
            continue
        seen.add(text)
        nbest.append((text, p.start_logit, p.end_logit))
    if null is not None and "" not in seen:
        nbest.append(("", null.start_logit, null.end_logit))
    if not nbest:
        nbest.append(("empty", 0.0, 0.0))
    probabilities = _softmax([s + e for _, s, e in nbest])
    return [collections.OrderedDict(text=t, probability=p, start_logit=float(s), end_logit=float(e))
            for (t, s, e), p in zip(nbest, probabilities)]


def _answer_text(example, feature, span, do_lower_case, decode):
    """The document's text of a span of tokens (`get_final_text`), `decode` giving their text."""
    tok_text = " ".join(decode(feature.tokens[span.start_index:span.end_index + 1]).split())
    orig_start = feature.token_to_orig_map[span.start_index]
    orig_end = feature.token_to_orig_map[span.end_index]
    orig_text = join_words(example.doc_tokens[orig_start:orig_end + 1],
                           example.doc_spaced[orig_start:orig_end + 1] if example.doc_spaced is not None else None)
    return get_final_text(tok_text, orig_text, do_lower_case)
