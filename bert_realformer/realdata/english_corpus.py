"""An English corpus for continued MLM pretraining: the VADER sentences and the fortunes, less
the dev and test texts of the two English tasks (`english.english_sentiment_splits`,
`fortunes.fortune_topic_splits`), so that no text a task is scored on is pretrained on."""

import random

from bert_realformer.realdata.english import english_sentences, english_sentiment_splits
from bert_realformer.realdata.fortunes import fortune_topic_splits, fortunes_by_topic
from bert_realformer.realdata.splits import normalised


def english_corpus(held_out: float = 0.05, seed: int = 0) -> dict[str, list[str]]:
    """{"train": [text], "held_out": [text]}: each text once (`splits.normalised`), none of the
    tasks' dev or test texts, shuffled by `seed`, `held_out` of them kept apart for evaluating
    the MLM."""
    scored = {normalised(text) for splits in (english_sentiment_splits(), fortune_topic_splits())
              for name in ("dev", "test") for text, _ in splits[name]}
    texts, seen = [], set()
    for text in [*english_sentences(), *(t for fortunes in fortunes_by_topic().values() for t in fortunes)]:
        key = normalised(text)
        if key and key not in scored and key not in seen:
            seen.add(key)
            texts.append(text)
    random.Random(seed).shuffle(texts)
    cut = round(held_out * len(texts))
    return {"train": texts[cut:], "held_out": texts[:cut]}
