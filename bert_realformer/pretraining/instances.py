"""Training instances from tokenized documents, exactly as the original create_pretraining_data.

For the same documents, flags and `random.Random(seed)`, the instances are the original's, in
the same order: every random draw happens in the same order with the same arguments.

Documents are held as token ids (compact, and no id lookups later): a document is a list of
sentences, a sentence an `array('i')` of ids. A negative entry `-(id + 1)` is a CJK character
that word segmentation marked as continuing the previous character's word; like a `##` piece it
joins that word under whole-word masking, and it is written out as the plain `id`.
"""

import dataclasses
import random
import types


@dataclasses.dataclass
class TrainingInstance:
    """One example: `[CLS] A [SEP] B [SEP]` after masking, as ids (no padding). Unmasked
    instances (dynamic masking) have no masked positions and carry `word_ids` instead: per
    position the number of the word it belongs to (1, 2, ...; 0 for `[CLS]`/`[SEP]`)."""
    input_ids: list
    segment_ids: list
    masked_lm_positions: list
    masked_lm_ids: list
    is_random_next: bool
    word_ids: list | None = None


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    do_whole_word_mask: bool = False
    dynamic: bool = False  # leave the tokens unmasked and record the word grouping instead


# What marks a token that starts a word, by vocabulary kind (`tokenization.vocabularies`):
# WordPiece marks the other pieces instead (`##`).
WORD_STARTS = types.MappingProxyType({"sentencepiece": "\u2581", "bpe": "\u0120"})  # ▁ and Ġ


class VocabIds:
    """What instance creation needs from the vocabulary, as ids."""

    def __init__(self, vocab, specials=("[UNK]", "[CLS]", "[SEP]", "[MASK]"), word_start=None):
        """`vocab`: {token: id} in file order (as `tokenization.load_vocab`); `specials`: its
        unknown, first, separator and mask tokens; `word_start`: the mark of a token that starts a
        word (SentencePiece's `▁`, byte-level BPE's `Ġ`), None for WordPiece (`##` marks the
        pieces that continue one)."""
        for token in specials:
            if token not in vocab:
                raise ValueError(f"the vocabulary has no {token} token")
        self.cls, self.sep, self.mask = (vocab[token] for token in specials[1:])
        # Random replacements draw from the distinct tokens in file order, as the original's
        # `list(tokenizer.vocab.keys())`.
        self.random_words = list(vocab.values())
        size = max(vocab.values()) + 1
        suffix = bytearray(size)
        for token, index in vocab.items():
            if token.startswith("##") if word_start is None else not (token.startswith(word_start) or
                                                                       token in specials):
                suffix[index] = 1
        self.continuation_flags = bytes(suffix)  # by id: 1 for a piece that continues a word

    @classmethod
    def of(cls, vocab_file, do_lower_case=True):
        """The ids of the vocabulary `vocab_file` names (`tokenization.vocabularies`): a WordPiece
        vocab.txt read as lines; a SentencePiece or BPE vocabulary through its tokenizer (its
        special tokens and word-start mark)."""
        from tokenization.reference import load_vocab
        from tokenization.vocabularies import tokenizer_for, vocabulary_kind
        kind = vocabulary_kind(vocab_file)
        if kind == "wordpiece":
            return cls(load_vocab(vocab_file))
        tokenizer = tokenizer_for(vocab_file, do_lower_case)
        specials = (tokenizer.unk_token, tokenizer.cls_token, tokenizer.sep_token, tokenizer.mask_token)
        return cls(tokenizer.vocab, specials, WORD_STARTS[kind])

    def continues_word(self, token_id):
        return token_id < 0 or self.continuation_flags[token_id]


def create_training_instances(documents, max_seq_length, dupe_factor, short_seq_prob, masking,
                              vocab_ids, rng, no_nsp=False, encode=None, sentence_order=False):
    """Shuffles `documents` (in place), makes `dupe_factor` passes, shuffles the instances.

    Args:
      documents: list of documents (non-empty lists of non-empty id sequences).
      masking: `MaskingOptions`; vocab_ids: `VocabIds`; rng: `random.Random`.
      no_nsp: fill instances with contiguous text, no sentence B (`create_contiguous_instances`).
      sentence_order: ALBERT's sentence-order pairs (`create_instances_from_document`).
      encode: optional function applied to each instance as soon as it exists (e.g. to a
        serialized record: far less memory than instance objects). The final shuffle permutes
        the encoded items exactly as it would the instances.
    Returns:
      The (encoded) instances in output order.
    """
    shuffle(rng, documents)
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            if no_nsp:
                made = create_contiguous_instances(documents, document_index, max_seq_length, short_seq_prob,
                                                   masking, vocab_ids, rng)
            else:
                made = create_instances_from_document(documents, document_index, max_seq_length, short_seq_prob,
                                                      masking, vocab_ids, rng, sentence_order)
            instances.extend(map(encode, made) if encode else made)
    shuffle(rng, instances)
    return instances


def create_instances_from_document(documents, document_index, max_seq_length, short_seq_prob,
                                   masking, vocab_ids, rng, sentence_order=False):
    """Sentence pairs `A`/`B` from one document; B is random (another document) half the time.
    With `sentence_order` (ALBERT's), B is always the text after A, and half the time the two
    are swapped instead (`is_random_next`: swapped); a chunk of one sentence still takes its B
    from another document, as google-research/albert's does. Either way the draws are made in
    the same order."""
    document = documents[document_index]
    max_num_tokens = max_seq_length - 3  # [CLS], [SEP], [SEP]
    # Mostly fill the sequence; sometimes (short_seq_prob) aim shorter, to match fine-tuning.
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = randint(rng, 2, max_num_tokens)

    instances = []
    chunk, chunk_length = [], 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            a_end = randint(rng, 1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b = []
            if len(chunk) == 1 or (not sentence_order and rng.random() < 0.5):
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                # Up to ten tries for another document (a one-document corpus keeps its own).
                for _ in range(10):
                    random_index = randint(rng, 0, len(documents) - 1)
                    if random_index != document_index:
                        break
                random_document = documents[random_index]
                random_start = randint(rng, 0, len(random_document) - 1)
                for sentence in random_document[random_start:]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target_b_length:
                        break
                # The unused sentences of this chunk go back for the next instance.
                i -= len(chunk) - a_end
            else:
                is_random_next = sentence_order and rng.random() < 0.5
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
                if is_random_next:
                    tokens_a, tokens_b = tokens_b, tokens_a
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            tokens = [vocab_ids.cls, *tokens_a, vocab_ids.sep, *tokens_b, vocab_ids.sep]
            segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            instances.append(_masked_instance(tokens, segment_ids, is_random_next, masking,
                                              vocab_ids, rng))
            chunk, chunk_length = [], 0
        i += 1
    return instances


def create_contiguous_instances(documents, document_index, max_seq_length, short_seq_prob,
                                masking, vocab_ids, rng):
    """No-NSP instances (RoBERTa-style): `[CLS] contiguous sentences [SEP]`, segment ids 0,
    `is_random_next` False. Whole sentences are packed up to `max_seq_length - 2` tokens
    (a shorter target with `short_seq_prob`) within the document; what overflows is cut."""
    document = documents[document_index]
    max_num_tokens = max_seq_length - 2
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = randint(rng, 2, max_num_tokens)
    instances = []
    chunk = []
    for i, sentence in enumerate(document):
        chunk.extend(sentence)
        if i == len(document) - 1 or len(chunk) >= target_seq_length:
            tokens = [vocab_ids.cls, *chunk[:max_num_tokens], vocab_ids.sep]
            instances.append(_masked_instance(tokens, [0] * len(tokens), False, masking,
                                              vocab_ids, rng))
            chunk = []
    return instances


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer of the two (B on a tie), one token at a time from its front or back at
    random, until they fit, in place: the original's cuts and random draws, counted first and
    applied once (deleting from a list's front one token at a time is quadratic in a long line)."""
    kept = [len(tokens_a), len(tokens_b)]
    cut = [[0, 0], [0, 0]]  # per list: tokens cut from the front, from the back
    while kept[0] + kept[1] > max_num_tokens:
        longer = 0 if kept[0] > kept[1] else 1
        kept[longer] -= 1
        cut[longer][0 if rng.random() < 0.5 else 1] += 1
    for tokens, (front, back) in zip((tokens_a, tokens_b), cut):
        del tokens[len(tokens) - back:]
        del tokens[:front]


def _masked_instance(tokens, segment_ids, is_random_next, masking, vocab_ids, rng):
    if masking.dynamic:
        plain = [t if t >= 0 else -t - 1 for t in tokens]
        return TrainingInstance(plain, segment_ids, [], [], is_random_next,
                                word_numbers(tokens, masking.do_whole_word_mask, vocab_ids))
    output, positions, labels = create_masked_lm_predictions(tokens, masking, vocab_ids, rng)
    return TrainingInstance(output, segment_ids, positions, labels, is_random_next)


def word_numbers(tokens, whole_word, vocab_ids):
    """The words masking chooses from, as one number per position: 0 for `[CLS]`/`[SEP]`, else
    1, 2, ... in order. With `whole_word`, a `##` piece or a marked CJK continuation shares
    the number of the word before it (the original's candidate grouping); otherwise every
    WordPiece is its own word."""
    cls, sep = vocab_ids.cls, vocab_ids.sep
    numbers, current = [], 0
    for token in tokens:
        if token == cls or token == sep:
            numbers.append(0)
            continue
        if not (whole_word and current and vocab_ids.continues_word(token)):
            current += 1
        numbers.append(current)
    return numbers


def create_masked_lm_predictions(tokens, masking, vocab_ids, rng):
    """Chooses up to `max_predictions_per_seq` (about `masked_lm_prob` of the tokens) positions;
    each becomes `[MASK]` 80%, stays 10%, becomes a random vocabulary word 10% of the time.

    Args: tokens: ids with `[CLS]`/`[SEP]` (continuation marks allowed).
    Returns: (plain ids after masking, sorted positions, plain original ids at those positions).
    """
    cls, sep = vocab_ids.cls, vocab_ids.sep
    if masking.do_whole_word_mask:
        candidates = []  # lists of positions that are masked together
        continues_word = vocab_ids.continues_word
        for i, token in enumerate(tokens):
            if token == cls or token == sep:
                continue
            if candidates and continues_word(token):
                candidates[-1].append(i)
            else:
                candidates.append([i])
    elif tokens.count(sep) == 2 and tokens.count(cls) == 1 and tokens[0] == cls and tokens[-1] == sep:
        # The usual [CLS] A [SEP] B [SEP]: every other position, without a Python-level scan.
        # Single positions are shuffled exactly as the one-element lists would be.
        middle = tokens.index(sep)
        candidates = list(range(1, middle)) + list(range(middle + 1, len(tokens) - 1))
    else:
        candidates = [i for i, token in enumerate(tokens) if token != cls and token != sep]
    shuffle(rng, candidates)
    if not masking.do_whole_word_mask:
        candidates = ((i,) for i in candidates)  # only the groups looked at below

    output = list(tokens) if min(tokens) >= 0 else [t if t >= 0 else -t - 1 for t in tokens]
    num_to_predict = min(masking.max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masking.masked_lm_prob))))
    masked = []  # (position, original id)
    covered = set()
    words = vocab_ids.random_words
    random = rng.random
    for group in candidates:
        if len(masked) >= num_to_predict:
            break
        # A whole word that would overshoot the budget is skipped, not cut.
        if len(masked) + len(group) > num_to_predict:
            continue
        if len(group) > 1 and any(p in covered for p in group):
            continue
        for p in group:
            covered.add(p)
            original = output[p]
            if random() < 0.8:
                output[p] = vocab_ids.mask
            elif random() >= 0.5:
                output[p] = words[randint(rng, 0, len(words) - 1)]
            # else: 10% of the time the token stays as it is
            masked.append((p, original))
    masked.sort()
    return output, [p for p, _ in masked], [label for _, label in masked]


# ---------------------------------------------------------------------------- random draws
# `random.Random.shuffle` and `randint`, inlined: the same draws in the same order (checked
# against the standard library below, which is used instead if they ever differ).
def _fast_shuffle(rng, x):
    getrandbits = rng.getrandbits
    for i in range(len(x) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        x[i], x[j] = x[j], x[i]


def _fast_randint(rng, a, b):
    n = b - a + 1
    if n <= 0:
        raise ValueError(f"empty range for randint({a}, {b})")
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return a + r


def _same_as_standard_library():
    for seed in range(20):
        ours, theirs = random.Random(seed), random.Random(seed)
        for length in (0, 1, 2, 3, 7, 64, 1000):
            a, b = list(range(length)), list(range(length))
            _fast_shuffle(ours, a)
            theirs.shuffle(b)
            if a != b or _fast_randint(ours, 0, length) != theirs.randint(0, length):
                return False
    return True


if _same_as_standard_library():
    shuffle, randint = _fast_shuffle, _fast_randint
else:  # pragma: no cover - a Python whose Random draws differently
    def shuffle(rng, x):
        rng.shuffle(x)

    def randint(rng, a, b):
        return rng.randint(a, b)
