"""ALBERT's SentencePiece tokenizer (`spiece.model`), as google-research/albert tokenizes.

A text is prepared as the original's `preprocess_text` does (white space collapsed, NFKD with the
combining marks dropped, lower-cased with `do_lower_case`), cut by the SentencePiece model into
pieces (`▁` marks the space before a word), and a piece that ends in a digit then a comma
(`1990,`) is cut again without the comma, the comma its own piece, as the original's
`encode_pieces` does, so that numbers are pieces of their own. The pieces are the model's
vocabulary: `vocab` maps each piece to its id (ALBERT's `[CLS]`, `[SEP]`, `[MASK]` are pieces of
the model; its unknown piece is `<unk>`, its padding `<pad>`).

    tokenizer = SentencePieceTokenizer("spiece.model", do_lower_case=True)
    tokens = tokenizer.tokenize("Hello world")        # ['▁hello', '▁world']
    ids = tokenizer.convert_tokens_to_ids(tokens)

The model runs on tensorflow-text's SentencePiece op (the library the original calls, in C++).
"""

from __future__ import annotations

import functools
import unicodedata

from bert_realformer import storage
from bert_realformer.errors import InputError
from tokenization.unicode_classes import re2_ranges

WORD_START = "\u2581"  # ▁


def preprocess_text(text: str, lower: bool) -> str:
    """The original's `preprocess_text`: white space collapsed and stripped, NFKD without its
    combining marks, lower-cased when `lower`."""
    text = unicodedata.normalize("NFKD", " ".join(text.strip().split()))
    text = "".join(character for character in text if not unicodedata.combining(character))
    return text.lower() if lower else text


class SentencePieceTokenizer:
    """The pieces and ids of a SentencePiece model (`model_file`: ALBERT's `spiece.model`, on any
    filesystem). `tokenize` prepares the text first (`preprocess_text`, lower-cased with
    `do_lower_case`)."""
    cls_token, sep_token, mask_token = "[CLS]", "[SEP]", "[MASK]"
    pair_separator = ("[SEP]",)

    def __init__(self, model_file: str, do_lower_case: bool = True):
        import tensorflow as tf
        self.vocab_file, self.do_lower_case = model_file, do_lower_case
        self._proto = storage.read_bytes(model_file)
        self._model = None
        try:
            model = self._op()
            pieces = model.id_to_string(tf.range(int(model.vocab_size()))).numpy()
        except tf.errors.OpError as error:
            raise InputError(f"{model_file}: expected a SentencePiece model (spiece.model); it cannot be parsed "
                             f"({error.message.splitlines()[0]}); truncated?") from None
        self.inverse = [piece.decode("utf-8") for piece in pieces]
        self.vocab = {piece: index for index, piece in enumerate(self.inverse)}
        self.unk_id = int(model.string_to_id("\u0000 not a piece").numpy())

    def _op(self, again: bool = False):
        """tensorflow-text's op holding the model: a resource of TensorFlow's eager context, made
        anew where the context was reset since (a script's `keras.backend.clear_session`)."""
        if self._model is None or again:
            import tensorflow as tf
            import tensorflow_text
            self._model = tensorflow_text.SentencepieceTokenizer(model=self._proto, out_type=tf.string)
        return self._model

    @property
    def unk_token(self) -> str:
        return self.inverse[self.unk_id]

    def _pieces(self, text: str) -> list[str]:
        import tensorflow as tf
        if not text:
            return []
        try:
            pieces = self._op().tokenize(text)
        except tf.errors.NotFoundError:
            pieces = self._op(again=True).tokenize(text)
        return [piece.decode("utf-8") for piece in pieces.numpy()]

    def tokenize(self, text: str) -> list[str]:
        """The pieces of `text` (no special tokens added)."""
        pieces = []
        for piece in self._pieces(preprocess_text(text, self.do_lower_case)):
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                again = self._pieces(piece[:-1].replace(WORD_START, ""))
                if piece[0] != WORD_START and again and again[0].startswith(WORD_START):
                    again = again[1:] if again[0] == WORD_START else [again[0][1:], *again[1:]]
                pieces += [*again, ","]
            else:
                pieces.append(piece)
        return pieces

    tokenize_word = tokenize  # (a word of a sentence split into words: its pieces start with ▁ as any text's)

    def tokenize_to_ids(self, text: str) -> list[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        """Each piece's id; a piece the model does not have is `<unk>`'s."""
        return [self.vocab.get(token, self.unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.inverse[index] for index in ids]

    def decode(self, tokens: list[str]) -> str:
        """The (prepared) text of pieces: each `▁` a space, none at the ends."""
        return " ".join("".join(tokens).replace(WORD_START, " ").split())


@functools.cache
def _graph_classes() -> dict[str, str]:
    """RE2 classes (tensorflow-text) of what `preprocess_text` and the digit-comma re-cut ask
    Python about: white space (`str.split`), combining marks, digits (`str.isdigit`)."""
    import sys
    found = {"space": [], "combining": [], "digit": []}
    for point in range(sys.maxunicode + 1):
        character = chr(point)
        if character.isspace():
            found["space"].append(point)
        if unicodedata.combining(character):
            found["combining"].append(point)
        if character.isdigit():
            found["digit"].append(point)
    return {name: re2_ranges(points) for name, points in found.items()}


class GraphSentencePiece:
    """`SentencePieceTokenizer`'s ids in TensorFlow ops only, for a SavedModel that takes raw text:
    `tokenize(texts)`: string [N] -> int64 RaggedTensor [N, (pieces)]. The text is prepared with
    string ops (`preprocess_text`'s steps), cut by tensorflow-text's SentencePiece op, and each
    piece ending in a digit and a comma cut again as `SentencePieceTokenizer.tokenize` cuts it.
    `resource`: the op's model, for the SavedModel to hold."""
    cls_token, sep_token = SentencePieceTokenizer.cls_token, SentencePieceTokenizer.sep_token

    def __init__(self, model_file: str, do_lower_case: bool = True):
        import tensorflow as tf
        import tensorflow_text
        self.vocab_file, self.do_lower_case = model_file, do_lower_case
        self.vocab = SentencePieceTokenizer(model_file, do_lower_case).vocab
        self.resource = tensorflow_text.SentencepieceTokenizer(model=storage.read_bytes(model_file),
                                                               out_type=tf.string)
        self._classes = _graph_classes()

    def prepared(self, texts):
        """`preprocess_text` of each text: string [N] -> string [N]."""
        import tensorflow as tf
        import tensorflow_text
        c = self._classes
        texts = tf.strings.regex_replace(texts, c["space"] + "+", " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
        texts = tf.strings.regex_replace(tensorflow_text.normalize_utf8(texts, "NFKD"), c["combining"], "")
        return tf.strings.lower(texts, encoding="utf-8") if self.do_lower_case else texts

    def tokenize(self, texts):
        import tensorflow as tf
        marked = WORD_START + ".*"
        pieces = self.resource.tokenize(self.prepared(texts))                    # [N, (P)] strings
        flat = pieces.flat_values
        recut = tf.strings.regex_full_match(flat, ".*" + self._classes["digit"] + ",")
        where = tf.where(recut)[:, 0]                                            # [K]
        cut = tf.gather(flat, where)
        again = self.resource.tokenize(tf.strings.regex_replace(
            tf.strings.substr(cut, tf.zeros_like(where, tf.int32), tf.strings.length(cut) - 1), WORD_START, ""))
        values, rows = again.flat_values, again.value_rowids()
        first = tf.equal(tf.range(tf.size(values, out_type=tf.int64)), tf.gather(again.row_starts(), rows))
        # A piece that did not start a word: its re-cut's leading ▁ goes (a lone ▁ piece with it).
        fix = first & tf.gather(~tf.strings.regex_full_match(cut, marked), rows) & \
            tf.strings.regex_full_match(values, marked)
        keep = ~(fix & tf.equal(values, WORD_START))
        values = tf.where(fix, tf.strings.regex_replace(values, "^" + WORD_START, ""), values)
        values, rows = tf.boolean_mask(values, keep), tf.boolean_mask(rows, keep)
        # Every output piece in order of (the piece it comes from, its place there), a comma last.
        kept = tf.where(~recut)[:, 0]
        count = tf.size(values, out_type=tf.int64)
        sources = tf.concat([kept, tf.gather(where, rows), where], 0)
        places = tf.concat([tf.zeros_like(kept), tf.range(count) + 1, tf.fill(tf.shape(where), count + 1)], 0)
        merged = tf.concat([tf.gather(flat, kept), values, tf.fill(tf.shape(where), ",")], 0)
        merged = tf.gather(merged, tf.argsort(sources * (count + 2) + places))
        per_piece = tf.math.bincount(tf.cast(sources, tf.int32), minlength=tf.size(flat), dtype=tf.int64)
        per_text = tf.math.unsorted_segment_sum(per_piece, pieces.value_rowids(), pieces.nrows())
        ids = tf.cast(self.resource.string_to_id(merged), tf.int64)
        return tf.RaggedTensor.from_row_lengths(ids, per_text, validate=False)
