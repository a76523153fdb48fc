"""SQuAD features as the original's: WordPiece tokens, windows of the document of at most
`max_seq_length - len(query) - 3` tokens every `doc_stride`, each token scored for the window
where it has the most context. A SentencePiece or byte-level BPE vocabulary tokenizes the
document word by word the same way (`tokenize_word`: each word's first token marked as
starting one), its own tokens around the question (RoBERTa's `<s> Q </s></s> D </s>`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from bert_realformer.errors import InputError
from bert_realformer.tasks.squad.reading import SquadExample

if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

    from tokenization import FullTokenizer


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


def _improve_answer_span(doc_tokens, start, end, tokenizer, answer_text):
    """The sub-span whose tokens equal the tokenized answer (e.g. "1895" inside "(1895-1943)"),
    the answer's words tokenized as the document's are."""
    answer = " ".join(piece for word in answer_text.split() for piece in tokenizer.tokenize_word(word))
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


def _document_pieces(example, tokenizer, is_training):
    """(the original word of each WordPiece, the document's WordPieces, the answer's first and
    last WordPiece: -1 for an unanswerable training question, None when not training)."""
    tok_to_orig, orig_to_tok, doc = [], [], []
    for i, token in enumerate(example.doc_tokens):
        orig_to_tok.append(len(doc))
        for piece in tokenizer.tokenize_word(token):
            tok_to_orig.append(i)
            doc.append(piece)
    if not is_training:
        return tok_to_orig, doc, None, None
    if example.is_impossible:
        return tok_to_orig, doc, -1, -1
    tok_start = orig_to_tok[example.start_position]
    tok_end = (orig_to_tok[example.end_position + 1] - 1
               if example.end_position < len(example.doc_tokens) - 1 else len(doc) - 1)
    tok_start, tok_end = _improve_answer_span(doc, tok_start, tok_end, tokenizer, example.orig_answer_text)
    return tok_to_orig, doc, tok_start, tok_end


def doc_spans(length: int, max_doc: int, doc_stride: int) -> list[tuple[int, int]]:
    """The windows (start, length) over a document of `length` WordPieces: at most `max_doc`
    long, starting `doc_stride` apart, the last one ending at the document's end."""
    spans, offset = [], 0
    while offset < length:
        span = min(length - offset, max_doc)
        spans.append((offset, span))
        if offset + span == length:
            break
        offset += min(span, doc_stride)
    return spans


def iter_features(examples: list[SquadExample], tokenizer: FullTokenizer, max_seq_length: int, doc_stride: int,
                  max_query_length: int, is_training: bool) -> Iterator[InputFeatures]:
    """Yields the `InputFeatures` of each window of each example (`doc_stride` apart), in order,
    as the original's `convert_examples_to_features` makes them; one at a time, so that
    training features can be streamed to a file."""
    between = list(tokenizer.pair_separator)
    unique_id = 1000000000
    for example_index, example in enumerate(examples):
        query = tokenizer.tokenize(example.question_text)[:max_query_length]
        tok_to_orig, doc, tok_start, tok_end = _document_pieces(example, tokenizer, is_training)
        max_doc = max_seq_length - len(query) - 2 - len(between)
        if max_doc < 1:
            raise InputError(f"max_seq_length={max_seq_length} leaves no room for the document after a "
                             f"{len(query)}-token question (lower max_query_length)",
                             options=("max_seq_length", "max_query_length"))
        spans = doc_spans(len(doc), max_doc, doc_stride)
        for span_index, (span_start, span_length) in enumerate(spans):
            tokens = [tokenizer.cls_token, *query, *between]
            segment_ids = [0] * len(tokens)
            token_to_orig, max_context = {}, {}
            for i in range(span_length):
                position = span_start + i
                token_to_orig[len(tokens)] = tok_to_orig[position]
                max_context[len(tokens)] = _is_max_context(spans, span_index, position)
                tokens.append(doc[position])
                segment_ids.append(1)
            tokens.append(tokenizer.sep_token)
            segment_ids.append(1)
            input_ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = [0] * (max_seq_length - len(input_ids))
            start = end = None
            if is_training and not example.is_impossible:
                span_end = span_start + span_length - 1
                if tok_start >= span_start and tok_end <= span_end:
                    start = tok_start - span_start + len(query) + 1 + len(between)
                    end = tok_end - span_start + len(query) + 1 + len(between)
                else:
                    start = end = 0
            if is_training and example.is_impossible:
                start = end = 0
            yield InputFeatures(unique_id, example_index, span_index, tokens, token_to_orig, max_context,
                                input_ids + pad, [1] * len(input_ids) + pad, segment_ids + pad,
                                start, end, example.is_impossible)
            unique_id += 1
