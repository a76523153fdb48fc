"""SQuAD v1.1 / v2.0 examples, read as the original run_squad.py reads them: the context is split
on whitespace into `doc_tokens` (and around each CJK character, since Chinese text has no
spaces; text without CJK characters is split as the original), with a character -> word map;
the answer's character offsets give its word span (answers whose text is not found there are
skipped, and counted).
"""

from __future__ import annotations

import dataclasses
import json
import logging

from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text
from tokenization.reference import is_chinese_char, whitespace_tokenize

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
