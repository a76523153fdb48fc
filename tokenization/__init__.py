"""Tokenization: the original BERT `FullTokenizer` and a fast tensorflow-text path with the same ids.

    from tokenization import FullTokenizer
    tokenizer = FullTokenizer(vocab_file="vocab.txt", do_lower_case=True)
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Hello, world!"))
"""

from tokenization.reference import (
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    convert_to_unicode,
    load_vocab,
    validate_case_matches_checkpoint,
    whitespace_tokenize,
)

__all__ = ["BasicTokenizer", "FullTokenizer", "WordpieceTokenizer", "convert_to_unicode", "load_vocab",
           "validate_case_matches_checkpoint", "whitespace_tokenize"]
