"""A fast tokenizer on tensorflow-text giving the same ids as the reference `FullTokenizer`.

Usable inside `tf.data` and a SavedModel (TensorFlow ops only). tensorflow-text's own
`BertTokenizer(lower_case=True)` case-folds with NFKC, which turns full-width punctuation into
ASCII (`，` -> `,`) and so differs from the original. Here every step of the original is
rebuilt from TensorFlow string ops instead:

  1. delete NUL, U+FFFD and Cc/Cf characters except tab/newline/CR; whitespace -> space;
  2. spaces around CJK Unified Ideographs;
  3. with lower-casing: full Unicode lower case (ICU, which like Python applies the final-sigma
     rule and maps `İ` to `i̇`), NFD, delete non-spacing marks;
  4. split on whitespace, and split punctuation characters off;
  5. FastWordpieceTokenizer (words longer than 200 code points -> `[UNK]`).

The character classes (control, whitespace, punctuation, marks) are generated from Python's own
`unicodedata`, the database the reference uses, not from the regex engine's newer tables.
"""

import functools
from collections.abc import Sequence

from tokenization import unicode_classes
from tokenization.reference import load_vocab

MAX_INPUT_CHARS_PER_WORD = 200
UNK_TOKEN = "[UNK]"


@functools.cache
def _patterns():
    return {name: unicode_classes.re2_class(name)
            for name in ("removed", "whitespace", "marks", "punctuation", "split", "cjk")}


class FastTokenizer:
    """Batch tokenization in TensorFlow ops with the reference's ids.

    `tokenize(texts)`: string tensor [N] -> int64 RaggedTensor [N, (pieces)].
    `words(texts)`: string tensor [N] -> RaggedTensor [N, (words)] after basic tokenization.
    """

    cls_token, sep_token = "[CLS]", "[SEP]"

    def __init__(self, vocab_file: str, do_lower_case: bool = True):
        import tensorflow as tf
        import tensorflow_text as tf_text
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.vocab = load_vocab(vocab_file)
        size = max(self.vocab.values()) + 1
        # One entry per id; an id whose token a later line took over gets a string that can
        # never be a word ('[' is always split off as punctuation).
        tokens = [f"[duplicate-{i}]" for i in range(size)]
        for token, index in self.vocab.items():
            tokens[index] = token
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator="##", max_bytes_per_word=4 * MAX_INPUT_CHARS_PER_WORD + 4,
            token_out_type=tf.int64, unknown_token=UNK_TOKEN, no_pretokenization=True,
            support_detokenization=False)
        self._patterns = _patterns()

    @property
    def resource(self):
        """The op's tables, for a SavedModel to hold."""
        return self._wordpiece

    def words(self, texts):
        import tensorflow as tf
        import tensorflow_text as tf_text
        p = self._patterns
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")
        texts = tf.strings.regex_replace(texts, p["removed"], "")
        texts = tf.strings.regex_replace(texts, p["whitespace"], " ")
        texts = tf.strings.regex_replace(texts, "(" + p["cjk"] + ")", r" \1 ")
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, p["marks"], "")
        return tf_text.regex_split(texts, delim_regex_pattern=p["split"] + "|" + p["punctuation"],
                                   keep_delim_regex_pattern=p["punctuation"])

    def tokenize(self, texts):
        import tensorflow as tf
        words = self.words(texts)
        # (on the flat words: a ragged `tf.where` traces a hundred shape assertions)
        flat = words.flat_values
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > MAX_INPUT_CHARS_PER_WORD
        words = words.with_flat_values(tf.where(too_long, UNK_TOKEN, flat))
        pieces = self._wordpiece.tokenize(words)          # [N, (words), (pieces)]
        return pieces.merge_dims(1, 2)

    def tokenize_to_lists(self, texts: Sequence[str]) -> list[list[int]]:
        """Python convenience: list of str -> list of id lists."""
        import tensorflow as tf
        return self.tokenize(tf.constant(list(texts), dtype=tf.string)).to_list()
