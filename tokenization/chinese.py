"""Chinese whole-word masking: which CJK character tokens continue a word.

BERT tokenizes Chinese one character per token, so WordPiece's `##` never groups Chinese words.
HFL (`chinese-roberta-wwm-ext`) segmented the text into words and treated every non-first
character of a multi-character word like a `##` piece when choosing what to mask; the token
ids stay those of the plain characters. Two sources of word boundaries:

* `JiebaSegmenter`: segments each line with jieba;
* a reference file in the format of Hugging Face's `run_chinese_ref.py`: one JSON list per
  non-blank input line, with the positions (counting `[CLS]` as 0) of the continuing characters.

`ContinuationToken` is a `str` equal to the plain character (so ids are unchanged) that the
masking code recognises as part of the previous token's word.
"""

import json
import logging

from bert_realformer.text_files import read_lines
from tokenization.reference import is_chinese_char


class ContinuationToken(str):
    """A CJK character token that continues the previous token's word (its value is unchanged)."""
    __slots__ = ()


def continues_word(token):
    """True for `##` WordPiece pieces and for CJK characters marked by word segmentation."""
    return isinstance(token, ContinuationToken) or token.startswith("##")


def _is_cjk_token(token):
    return len(token) == 1 and is_chinese_char(ord(token))


def mark_words(tokens, words):
    """Marks continuing characters of `words` (multi-character, all-CJK) in `tokens`.

    Greedy longest match over runs of single-CJK-character tokens, as HFL and Hugging Face's
    `run_chinese_ref.py` align segmenter words with BERT tokens. Returns a new list.
    """
    words = {w for w in words if len(w) > 1 and all(is_chinese_char(ord(c)) for c in w)}
    out = list(tokens)
    if not words:
        return out
    longest = max(len(w) for w in words)
    start = 0
    while start < len(out):
        matched = 1
        if _is_cjk_token(out[start]):
            for length in range(min(longest, len(out) - start), 1, -1):
                span = out[start:start + length]
                if all(_is_cjk_token(t) for t in span) and "".join(span) in words:
                    matched = length
                    break
        for j in range(start + 1, start + matched):
            out[j] = ContinuationToken(out[j])
        start += matched
    return out


def apply_reference_positions(tokens, positions, where):
    """Marks the tokens at `positions` (counting `[CLS]` as 0) as continuing characters.

    `where` names the file and line for the error raised on a position that does not point at a
    single CJK character token.
    """
    out = list(tokens)
    for position in positions:
        index = position - 1
        if not isinstance(position, int) or not 0 <= index < len(out) or not _is_cjk_token(out[index]):
            raise ValueError(f"{where}: position {position!r} is not a Chinese character token "
                             f"of this line ({len(out)} tokens, [CLS] counted as 0)")
        out[index] = ContinuationToken(out[index])
    return out


def read_reference_file(path):
    """The JSON lists of a `run_chinese_ref.py` reference file, one per line."""
    lists = []
    for number, line in read_lines(path):
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not a JSON list ({error.msg})") from None
        if not isinstance(value, list):
            raise ValueError(f"{path}:{number}: expected a JSON list of positions")
        lists.append((number, value))
    return lists


class JiebaSegmenter:
    """Marks word continuations in a line's tokens using jieba's segmentation of the line."""

    def __init__(self):
        from bert_realformer import optional
        jieba = optional.require("jieba", "--chinese_word_segmentation=jieba")
        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        self._jieba = jieba

    def __call__(self, line, tokens):
        return mark_words(tokens, self._jieba.lcut(line))
