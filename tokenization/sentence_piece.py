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

import unicodedata

from bert_realformer import storage

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
        model = self._op()
        pieces = model.id_to_string(tf.range(int(model.vocab_size()))).numpy()
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
