"""Tokenization: the original BERT `FullTokenizer` and a fast tensorflow-text path with the same ids.

    from tokenization import FullTokenizer
    tokenizer = FullTokenizer(vocab_file="vocab.txt", do_lower_case=True)
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Hello, world!"))
"""

from tokenization.full import FullTokenizer
from tokenization.reference import (
    BasicTokenizer,
    WordpieceTokenizer,
    _is_control,
    _is_punctuation,
    _is_whitespace,
    convert_by_vocab,
    convert_ids_to_tokens,
    convert_to_unicode,
    convert_tokens_to_ids,
    load_vocab,
    printable_text,
    validate_case_matches_checkpoint,
    whitespace_tokenize,
)

# Every public and test-used name of the original `tokenization` module.
__all__ = ["BasicTokenizer", "FullTokenizer", "WordpieceTokenizer", "_is_control", "_is_punctuation",
           "_is_whitespace", "convert_by_vocab", "convert_ids_to_tokens", "convert_to_unicode",
           "convert_tokens_to_ids", "load_vocab", "printable_text", "validate_case_matches_checkpoint",
           "whitespace_tokenize"]
