"""English text: the VADER paper's human-rated sentences (movie reviews, Amazon reviews, NYT
editorials, tweets, from the `vaderSentiment==3.3.2` source distribution) and a two-class
sentiment task made from their ratings."""

import functools
import tarfile

from bert_realformer.realdata.sources import vader_sdist
from bert_realformer.realdata.splits import labelled_splits

# A sentence's mean rating (-4 to 4, by about 20 raters) at least this far from 0 gives it a label
# (positive or negative); nearer, it is left out of the task as neither.
SENTIMENT_MARGIN = 1.0


def vader_ratings() -> tuple[tuple[str, float, str], ...]:
    """((source, mean rating, text)) of the four `*_GroundTruth.txt` files, in file order;
    `source`: amazonReviewSnippets, movieReviewSnippets, nytEditorialSnippets or tweets."""
    return _ratings_in(vader_sdist())


@functools.cache
def _ratings_in(path: str) -> tuple[tuple[str, float, str], ...]:
    """`vader_ratings` of the source distribution at `path`, read once per process (the tasks
    and the corpus made from them all read it)."""
    rows = []
    with tarfile.open(path) as sdist:
        inner = sdist.extractfile("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz")
        with tarfile.open(fileobj=inner) as data:
            for member in sorted(data.getnames()):
                if member.endswith("_GroundTruth.txt"):
                    source = member.rsplit("/", 1)[-1].removesuffix("_GroundTruth.txt")
                    text = data.extractfile(member).read().decode("utf-8", "replace")
                    for line in text.split("\n"):
                        fields = line.rstrip("\r").split("\t")
                        if len(fields) >= 3 and fields[2].strip():
                            rows.append((source, float(fields[1]), fields[2]))
    return tuple(rows)


def english_sentences():
    """About 23,700 English sentences: the text column of the four `*_GroundTruth.txt` files."""
    return [text for _, _, text in vader_ratings()]


def english_sentiment_splits(seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """{train, dev, test: [(text, "positive" | "negative")]}: the rated sentences at least
    `SENTIMENT_MARGIN` from neutral, deduplicated (`splits.labelled_splits`: a text rated both
    ways is dropped), split 80/10/10 by class with `seed`."""
    rows = [(text, "positive" if rating > 0 else "negative") for _, rating, text in vader_ratings()
            if abs(rating) >= SENTIMENT_MARGIN]
    return labelled_splits(rows, seed)
