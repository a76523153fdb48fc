"""SQuAD v1.1 / v2.0 as the original run_squad.py: examples, sliding-window features, and
predictions mapped back to the original text.

Reading: the context is split on whitespace into `doc_tokens` (and around each CJK character,
since Chinese text has no spaces; text without CJK characters is split as the original), with
a character -> word map;
the answer's character offsets give its word span (answers whose text is not found there are
skipped, and counted). Features: WordPiece tokens, windows of the document of at most
`max_seq_length - len(query) - 3` tokens every `doc_stride`, each token scored for the window
where it has the most context. Predictions: the n-best start/end pairs (end >= start, at most
`max_answer_length`, start in its max-context window), the null answer for v2.0 (the lowest
null score over windows; predicted when score_null - best_non_null > threshold), and the text
mapped back to the original characters (`get_final_text`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
from typing import TYPE_CHECKING

from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text
from tokenization.reference import BasicTokenizer, is_chinese_char, whitespace_tokenize

if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

    from tokenization import FullTokenizer

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str = None
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False
    doc_spaced: list = None   # whether whitespace preceded each doc token (None: all)


@dataclasses.dataclass
class InputFeatures:
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


def _is_whitespace(c):
    return c in " \t\r\n" or ord(c) == 0x202F


def split_context(context):
    """(words, spaced, char_to_word): the context cut at whitespace, as the original, and
    also around each CJK character (Chinese text has no spaces: CMRC 2018, DRCD), so that an
    answer is a span of words; `spaced[i]`: whitespace preceded word i; `char_to_word[c]`: the
    word of character c. Text without CJK characters is split exactly as the original."""
    words, spaced, char_to_word = [], [], []
    boundary = after_space = True
    for c in context:
        if _is_whitespace(c):
            boundary = after_space = True
        else:
            cjk = is_chinese_char(ord(c))
            if boundary or cjk:
                words.append(c)
                spaced.append(after_space)
            else:
                words[-1] += c
            boundary, after_space = cjk, False
        char_to_word.append(len(words) - 1)
    return words, spaced, char_to_word


def join_words(words, spaced=None):
    """Words back to text: a space where the context had whitespace (the original's
    `" ".join` for text without CJK characters), none between a CJK character and its
    neighbours."""
    if spaced is None:
        return " ".join(words)
    return "".join((" " if space and i else "") + word
                   for i, (word, space) in enumerate(zip(words, spaced, strict=True)))


def read_squad_examples(input_file: str, is_training: bool,
                        version_2_with_negative: bool = False) -> tuple[list[SquadExample], int]:
    """Returns (examples, number of answers skipped because their offsets do not match)."""
    try:
        data = json.loads(read_text(input_file))["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise InputError(f"{input_file}: not a SQuAD JSON file ({error})") from None
    examples, skipped = [], 0
    for entry in data:
        for paragraph in entry["paragraphs"]:
            doc_tokens, spaced, char_to_word = split_context(paragraph["context"])
            for qa in paragraph["qas"]:
                start = end = None
                answer_text = None
                impossible = False
                if is_training:
                    impossible = bool(version_2_with_negative and qa.get("is_impossible", False))
                    if len(qa["answers"]) != 1 and not impossible:
                        raise InputError(f"{input_file}: question {qa['id']}: for training, each question "
                                         "should have exactly 1 answer")
                    if impossible:
                        start, end, answer_text = -1, -1, ""
                    else:
                        answer = qa["answers"][0]
                        answer_text, offset = answer["text"], answer["answer_start"]
                        last = offset + len(answer_text) - 1
                        if not 0 <= offset <= last < len(char_to_word):
                            skipped += 1
                            logger.warning("%s: answer offsets outside the context, skipped", qa["id"])
                            continue
                        start, end = char_to_word[offset], char_to_word[last]
                        actual = join_words(doc_tokens[start:end + 1], spaced[start:end + 1])
                        cleaned = " ".join(whitespace_tokenize(answer_text))
                        if actual.find(cleaned) == -1:
                            skipped += 1
                            logger.warning("%s: could not find answer %r in %r, skipped", qa["id"], cleaned, actual)
                            continue
                examples.append(SquadExample(qa["id"], qa["question"], doc_tokens, answer_text, start, end,
                                             impossible, spaced))
    return examples, skipped


def _improve_answer_span(doc_tokens, start, end, tokenizer, answer_text):
    """The sub-span whose tokens equal the tokenized answer (e.g. "1895" inside "(1895-1943)")."""
    answer = " ".join(tokenizer.tokenize(answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def _is_max_context(doc_spans, current, position):
    """Whether window `current` gives `position` its most context: score = min(left, right)
    context + 0.01 * window length, the first best window wins."""
    best_score, best_index = None, None
    for index, (span_start, span_length) in enumerate(doc_spans):
        span_end = span_start + span_length - 1
        if not span_start <= position <= span_end:
            continue
        score = min(position - span_start, span_end - position) + 0.01 * span_length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return current == best_index


def convert_examples_to_features(examples: list[SquadExample], tokenizer: FullTokenizer, max_seq_length: int,
                                 doc_stride: int, max_query_length: int, is_training: bool) -> list[InputFeatures]:
    """The `InputFeatures` of every window of every example, as a list (see `iter_features`)."""
    return list(iter_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training))


def iter_features(examples: list[SquadExample], tokenizer: FullTokenizer, max_seq_length: int, doc_stride: int,
                  max_query_length: int, is_training: bool) -> Iterator[InputFeatures]:
    """Yields the `InputFeatures` of each window of each example (`doc_stride` apart), in order,
    as the original's `convert_examples_to_features` makes them; one at a time, so that
    training features can be streamed to a file."""
    unique_id = 1000000000
    for example_index, example in enumerate(examples):
        query = tokenizer.tokenize(example.question_text)[:max_query_length]
        tok_to_orig, orig_to_tok, doc = [], [], []
        for i, token in enumerate(example.doc_tokens):
            orig_to_tok.append(len(doc))
            for piece in tokenizer.tokenize(token):
                tok_to_orig.append(i)
                doc.append(piece)
        tok_start = tok_end = None
        if is_training and example.is_impossible:
            tok_start = tok_end = -1
        if is_training and not example.is_impossible:
            tok_start = orig_to_tok[example.start_position]
            tok_end = (orig_to_tok[example.end_position + 1] - 1
                       if example.end_position < len(example.doc_tokens) - 1 else len(doc) - 1)
            tok_start, tok_end = _improve_answer_span(doc, tok_start, tok_end, tokenizer, example.orig_answer_text)
        max_doc = max_seq_length - len(query) - 3
        if max_doc < 1:
            raise InputError(f"--max_seq_length={max_seq_length} leaves no room for the document after a "
                             f"{len(query)}-token question (lower --max_query_length)")
        spans, offset = [], 0
        while offset < len(doc):
            length = min(len(doc) - offset, max_doc)
            spans.append((offset, length))
            if offset + length == len(doc):
                break
            offset += min(length, doc_stride)
        for span_index, (span_start, span_length) in enumerate(spans):
            tokens = ["[CLS]", *query, "[SEP]"]
            segment_ids = [0] * len(tokens)
            token_to_orig, max_context = {}, {}
            for i in range(span_length):
                position = span_start + i
                token_to_orig[len(tokens)] = tok_to_orig[position]
                max_context[len(tokens)] = _is_max_context(spans, span_index, position)
                tokens.append(doc[position])
                segment_ids.append(1)
            tokens.append("[SEP]")
            segment_ids.append(1)
            input_ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = [0] * (max_seq_length - len(input_ids))
            start = end = None
            if is_training and not example.is_impossible:
                span_end = span_start + span_length - 1
                if tok_start >= span_start and tok_end <= span_end:
                    start = tok_start - span_start + len(query) + 2
                    end = tok_end - span_start + len(query) + 2
                else:
                    start = end = 0
            if is_training and example.is_impossible:
                start = end = 0
            yield InputFeatures(unique_id, example_index, span_index, tokens, token_to_orig, max_context,
                                input_ids + pad, [1] * len(input_ids) + pad, segment_ids + pad,
                                start, end, example.is_impossible)
            unique_id += 1


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


def compute_predictions(examples, features, results, n_best_size, max_answer_length, do_lower_case,
                        version_2_with_negative=False, null_score_diff_threshold=0.0):
    """Returns (predictions {qid: text}, nbest {qid: [entries]}, null odds {qid: diff} (v2.0))."""
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    result_of = {r.unique_id: r for r in results}
    predictions, nbest_json, null_odds = {}, {}, {}
    Prelim = collections.namedtuple("Prelim", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
    for example_index, example in enumerate(examples):
        example_features = by_example[example_index]
        prelim = []
        score_null, null_feature, null_start, null_end = 1000000, 0, 0, 0
        for feature_index, feature in enumerate(example_features):
            result = result_of[feature.unique_id]
            if version_2_with_negative:
                null_score = result.start_logits[0] + result.end_logits[0]
                if null_score < score_null:
                    score_null, null_feature = null_score, feature_index
                    null_start, null_end = result.start_logits[0], result.end_logits[0]
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
        if version_2_with_negative:
            prelim.append(Prelim(null_feature, 0, 0, null_start, null_end))
        prelim.sort(key=lambda p: p.start_logit + p.end_logit, reverse=True)
        seen, nbest = set(), []
        for p in prelim:
            if len(nbest) >= n_best_size:
                break
            feature = example_features[p.feature_index]
            if p.start_index > 0:
                pieces = " ".join(feature.tokens[p.start_index:p.end_index + 1])
                tok_text = " ".join(pieces.replace(" ##", "").replace("##", "").strip().split())
                orig_start = feature.token_to_orig_map[p.start_index]
                orig_end = feature.token_to_orig_map[p.end_index]
                orig_text = join_words(example.doc_tokens[orig_start:orig_end + 1],
                                       example.doc_spaced[orig_start:orig_end + 1]
                                       if example.doc_spaced is not None else None)
                text = get_final_text(tok_text, orig_text, do_lower_case)
                if text in seen:
                    continue
            else:
                text = ""
            seen.add(text)
            nbest.append((text, p.start_logit, p.end_logit))
        if version_2_with_negative and "" not in seen:
            nbest.append(("", null_start, null_end))
        if not nbest:
            nbest.append(("empty", 0.0, 0.0))
        probabilities = _softmax([s + e for _, s, e in nbest])
        entries = [collections.OrderedDict(text=t, probability=p, start_logit=float(s), end_logit=float(e))
                   for (t, s, e), p in zip(nbest, probabilities)]
        nbest_json[example.qas_id] = entries
        best_non_null = next((e for e in entries if e["text"]), None)
        if not version_2_with_negative:
            predictions[example.qas_id] = entries[0]["text"]
        else:
            if best_non_null is None:
                diff = 1e9  # every candidate was the null answer
            else:
                diff = score_null - best_non_null["start_logit"] - best_non_null["end_logit"]
            null_odds[example.qas_id] = float(diff)
            predictions[example.qas_id] = "" if diff > null_score_diff_threshold else best_non_null["text"]
    return predictions, nbest_json, null_odds
