"""The English data a study from a released English checkpoint uses: the two-class sentiment task
from the VADER ratings, the 30-topic fortune task, and the pretraining corpus that holds none of
their dev or test texts; each split once, deduplicated, by class."""

import os

import pytest

from bert_realformer.realdata.splits import class_balance, labelled_splits, normalised


@pytest.fixture(scope="module")
def tasks():
    from bert_realformer import realdata
    from bert_realformer.realdata.english import english_sentiment_splits
    from bert_realformer.realdata.fortunes import fortune_topic_splits
    try:
        return {"sentiment": english_sentiment_splits(), "topics": fortune_topic_splits()}
    except realdata.MissingDataError as error:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise
        pytest.skip(str(error))


def test_splits_are_deduplicated_by_class_and_fixed_by_the_seed():
    rows = [("A b", "x"), ("a  B", "x"), ("c", "y"), ("C", "x")] + [(f"t{i}", "xy"[i % 2]) for i in range(40)]
    splits = labelled_splits(rows, seed=3)
    texts = [normalised(text) for rows_of in splits.values() for text, _ in rows_of]
    assert len(texts) == len(set(texts)) == 41  # 'a b' once; 'c', labelled both ways, dropped
    assert "c" not in texts
    assert {name: len(rows_of) for name, rows_of in splits.items()} == {"train": 33, "dev": 4, "test": 4}
    assert splits == labelled_splits(rows, seed=3) != labelled_splits(rows, seed=4)
    balance = class_balance(splits)
    assert balance["train"]["classes"] == {"x": 17, "y": 16}  # 21 x and 20 y, 80% of each
    assert balance["dev"]["majority_baseline"] == 0.5  # 2 x of 4


def test_the_english_tasks_hold_what_their_docs_say(tasks):
    sentiment, topics = class_balance(tasks["sentiment"]), class_balance(tasks["topics"])
    assert set(sentiment["train"]["classes"]) == {"negative", "positive"}
    assert sentiment["train"]["examples"] > 12_000 and 0.5 < sentiment["test"]["majority_baseline"] < 0.56
    assert len(topics["train"]["classes"]) == 30 and topics["train"]["examples"] > 10_000
    assert topics["test"]["majority_baseline"] < 0.1
    for splits in tasks.values():  # no text in two splits
        seen = [normalised(text) for rows in splits.values() for text, _ in rows]
        assert len(seen) == len(set(seen))
        assert all("\t" not in text and "\n" not in text for rows in splits.values() for text, _ in rows)


def test_the_corpus_holds_no_text_a_task_is_scored_on(tasks):
    from bert_realformer.realdata.english_corpus import english_corpus
    corpus = english_corpus()
    pretrained = {normalised(text) for part in corpus.values() for text in part}
    scored = {normalised(text) for splits in tasks.values() for name in ("dev", "test") for text, _ in splits[name]}
    trained = {normalised(text) for splits in tasks.values() for text, _ in splits["train"]}
    assert not pretrained & scored
    assert len(trained & pretrained) > 0.95 * len(trained)  # the training texts are in it
    assert 0.04 < len(corpus["held_out"]) / len(pretrained) < 0.06
    assert not {normalised(t) for t in corpus["held_out"]} & {normalised(t) for t in corpus["train"]}
