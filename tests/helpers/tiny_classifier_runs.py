"""run_classifier.py from the tiny pretrained checkpoint (tests/data/bert_postln_tiny) on a few
short English texts: the data, the flags and the weights a run wrote."""

import os

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
TEXTS = ["the cat sat on the mat", "a big dog ran fast", "the bird can sing a song", "it was a bad day",
         "we read a good book", "the red house is small", "the sun is hot", "a cold night with snow",
         "the old man can walk", "she flew over the tree", "they play in the rain", "you write a new book"]


def thucnews_data(tmp_path, labels):
    """DATA_DIR with train/dev/test.tsv (thucnews' LABEL<TAB>TEXT) of `labels` over TEXTS."""
    data = tmp_path / "data"
    data.mkdir()
    rows = "".join(f"{label}\t{TEXTS[i % len(TEXTS)]}\n" for i, label in enumerate(labels))
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text(rows)
    return data


def classifier_flags(data, out, *more):
    """run_classifier.py's flags for `data` from the tiny checkpoint into `out`, then `more`."""
    return ["--task_name=thucnews", f"--data_dir={data}", f"--vocab_file={TINY}/vocab.txt",
            f"--bert_config_file={TINY}/bert_config.json", f"--init_checkpoint={TINY}/bert_model.ckpt",
            f"--output_dir={out}", "--max_seq_length=16", *more]


def tf1_weights(prefix):
    """{name: array} of the encoder's and the classifier's weights in the TF1 checkpoint `prefix`."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(("bert/", "output_"))}
