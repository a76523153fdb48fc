"""`--vocab_file` against the model it feeds, before any work.

A token's id is its line number in the vocabulary (as the original reads it), so every line
must index a row of the model's embedding table (`vocab_size` rows): a longer file, or one
whose duplicate lines push later tokens past the table, would fail mid-training on a CPU and
embed zeros silently on a GPU. A shorter file is legal (an extended model fine-tuned with its old
vocabulary) but never produces the model's newer tokens: said in one warning line. The special
tokens a script writes must be in it.
"""

from __future__ import annotations

import collections
import logging

from bert_realformer.errors import InputError
from tokenization.reference import vocab_lines

logger = logging.getLogger(__name__)

FINE_TUNING_TOKENS = ("[UNK]", "[CLS]", "[SEP]")
DUPLICATES_SHOWN = 3


def duplicates(tokens: list[str]) -> list[tuple[str, list[int]]]:
    """[(token, its line numbers (1-based))] of tokens on more than one line, in file order."""
    lines: dict[str, list[int]] = collections.defaultdict(list)
    for number, token in enumerate(tokens, 1):
        lines[token].append(number)
    return [(token, numbers) for token, numbers in lines.items() if len(numbers) > 1]


def check_vocabulary(vocab_file: str, vocab_size: int | None,
                     needed: tuple[str, ...] = FINE_TUNING_TOKENS) -> list[str]:
    """An `InputError` naming --vocab_file when it has more lines than `vocab_size` (with its
    first duplicate tokens and their lines, when duplicates are why), or lacks a token of
    `needed`; one warning when it has fewer. Returns its tokens by line."""
    tokens = vocab_lines(vocab_file)
    for token in needed:
        if token not in tokens:
            raise InputError(f"--vocab_file={vocab_file} has no {token} line; a BERT vocabulary holds "
                             f"{', '.join(needed)} (each on a line of its own)")
    if vocab_size is None:
        return tokens
    if len(tokens) > vocab_size:
        repeated = duplicates(tokens)
        why = ""
        if repeated:
            shown = "; ".join(f"{token!r} on lines {', '.join(map(str, numbers))}"
                              for token, numbers in repeated[:DUPLICATES_SHOWN])
            more = f" and {len(repeated) - DUPLICATES_SHOWN} more" if len(repeated) > DUPLICATES_SHOWN else ""
            why = f"; {len(repeated)} tokens are on more than one line ({shown}{more})"
        raise InputError(f"--vocab_file={vocab_file} has {len(tokens)} lines but the model's vocab_size is "
                         f"{vocab_size} (--bert_config_file): ids from {vocab_size} on would index past its "
                         f"embedding table{why}; use the vocabulary the checkpoint was trained with")
    if len(tokens) < vocab_size:
        logger.warning("--vocab_file=%s has %d lines but the model's vocab_size is %d: the model's last %d tokens "
                       "can never be produced from text (an extended model's vocabulary is the one made with it)",
                       vocab_file, len(tokens), vocab_size, vocab_size - len(tokens))
    return tokens
