"""Every script, one after another in this process, with every input and output under one root
directory: a local directory or a non-local one such as `ram://...` (TensorFlow's in-memory
filesystem, which `open()` and `os.*` cannot reach).

    python tests/helpers/storage_journey.py ROOT REPORT.json

The inputs are copied under ROOT through `tf.io.gfile`; REPORT.json (a local file) records each
step's exit status and stderr, and the content of the outputs the test compares: the same
journey on a local directory and on `ram://` must give the same files.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.helpers.in_process import ROOT, run_script  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data")
TINY = os.path.join(DATA, "bert_postln_tiny")

CLASSIFIER_ROWS = [("good", "the cat sat on the mat"), ("bad", "a big dog ran fast"),
                   ("good", "the bird can sing a song"), ("bad", "it was a bad day"),
                   ("good", "we read a good book"), ("bad", "the red house is small")] * 2
CONLL = "".join(f"{a} B-PER\n{b} O\n{c} B-LOC\n\n" for a, b, c in
                [("he", "ran", "house"), ("she", "sat", "tree"), ("they", "flew", "mat"), ("we", "sing", "house")])
SQUAD = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
    "context": "the cat sat on the mat and the dog ran fast",
    "qas": [{"id": "q1", "question": "where did the cat sit", "is_impossible": False,
             "answers": [{"text": "the mat", "answer_start": 15}]},
            {"id": "q2", "question": "who ran fast", "is_impossible": False,
             "answers": [{"text": "the dog", "answer_start": 27}]},
            {"id": "q3", "question": "who can fly", "is_impossible": True, "answers": []}]}]}]}
CHOICES = [{"context": "the cat sat on the", "choices": ["mat", "song"], "label": 0},
           {"context": "the bird can", "choices": ["read", "sing"], "label": 1},
           {"context": "the dog ran", "choices": ["fast", "house"], "label": 0}]

# Outputs whose bytes must not depend on where the run writes (no paths, times or hosts in them).
COMPARED = ["data/train.tfrecord", "pretrain/eval_results.txt", "classify/eval_results.txt",
            "classify/test_results.tsv", "recheck/eval_results.txt", "squad/predictions.json",
            "squad/null_odds.json", "squad/eval_results.txt", "ner/eval_results.txt",
            "ner/test_predictions.txt", "choice/eval_results.txt", "choice/test_results.tsv",
            "features.jsonl", "attention/attention_stats.json", "hf/config.json", "tf1/bert_config.json"]


def main(root, report_path):
    import tensorflow as tf
    gfile = tf.io.gfile

    def put(name, text):
        gfile.makedirs(os.path.dirname(f"{root}/{name}"))
        with gfile.GFile(f"{root}/{name}", "w") as f:
            f.write(text)

    def copy(local, name):
        with open(local, "rb") as f:
            data = f.read()
        gfile.makedirs(os.path.dirname(f"{root}/{name}"))
        with gfile.GFile(f"{root}/{name}", "wb") as f:
            f.write(data)

    copy(os.path.join(DATA, "pretraining_data", "input.txt"), "in/corpus.txt")
    copy(os.path.join(TINY, "vocab.txt"), "in/vocab.txt")
    copy(os.path.join(TINY, "bert_config.json"), "in/bert_config.json")
    for split in ("train", "dev", "test"):
        put(f"in/topics/{split}.tsv", "".join(f"{label}\t{text}\n" for label, text in CLASSIFIER_ROWS))
        put(f"in/ner/{split}.txt", CONLL)
        put(f"in/choice/{split}.jsonl", "".join(json.dumps(row) + "\n" for row in CHOICES))
    put("in/squad.json", json.dumps(SQUAD))
    put("in/lines.txt", "the cat sat ||| the dog ran\na good book\n")

    r = root
    model = [f"--bert_config_file={r}/in/bert_config.json", f"--vocab_file={r}/in/vocab.txt"]
    tune = [*model, "--max_seq_length=32", "--train_batch_size=4", "--learning_rate=1e-3", "--iterations_per_loop=3"]
    steps = [
        ("create_pretraining_data.py", f"--input_file={r}/in/corpus.txt", f"--output_file={r}/data/train.tfrecord",
         f"--vocab_file={r}/in/vocab.txt", "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1",
         "--num_workers=1"),
        ("run_pretraining.py", f"--bert_config_file={r}/in/bert_config.json", f"--input_file={r}/data/*.tfrecord",
         f"--output_dir={r}/pretrain", "--do_train", "--do_eval", "--train_batch_size=8", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--num_train_steps=4", "--num_warmup_steps=1", "--learning_rate=1e-3",
         "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--max_eval_steps=2"),
        ("run_classifier.py", *tune, "--task_name=thucnews", f"--data_dir={r}/in/topics",
         f"--init_checkpoint={r}/pretrain", f"--output_dir={r}/classify", "--do_train", "--do_eval", "--do_predict",
         "--num_train_epochs=1", f"--export_dir={r}/export"),
        ("run_classifier.py", *tune, "--task_name=thucnews", f"--data_dir={r}/in/topics",
         f"--init_checkpoint={r}/classify", f"--output_dir={r}/recheck", "--do_eval"),
        ("run_squad.py", *model, f"--train_file={r}/in/squad.json", f"--predict_file={r}/in/squad.json",
         f"--init_checkpoint={r}/pretrain", f"--output_dir={r}/squad", "--do_train", "--do_predict", "--do_eval",
         "--version_2_with_negative", "--max_seq_length=32", "--doc_stride=16", "--max_query_length=8",
         "--train_batch_size=2", "--num_train_epochs=1"),
        ("run_ner.py", *tune, "--task_name=generic", f"--data_dir={r}/in/ner", f"--output_dir={r}/ner",
         "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1"),
        ("run_multiple_choice.py", *tune, "--task_name=generic", f"--data_dir={r}/in/choice",
         f"--output_dir={r}/choice", "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1"),
        ("extract_features.py", *model, f"--input_file={r}/in/lines.txt", f"--output_file={r}/features.jsonl",
         f"--init_checkpoint={r}/pretrain", "--max_seq_length=16", "--layers=-1"),
        ("analyze_attention.py", f"--bert_config_file={r}/in/bert_config.json", f"--init_checkpoint={r}/pretrain",
         f"--input_file={r}/data/train.tfrecord", "--max_seq_length=64", "--max_predictions_per_seq=10",
         "--max_examples=16", f"--output_dir={r}/attention"),
        ("convert_checkpoint.py", "--from=ours", "--to=tf1", f"--input={r}/pretrain", f"--output={r}/tf1",
         f"--bert_config_file={r}/in/bert_config.json", f"--vocab_file={r}/in/vocab.txt"),
        ("convert_checkpoint.py", "--from=tf1", "--to=hf", f"--input={r}/tf1/bert_model.ckpt",
         f"--output={r}/hf", "--force"),
        ("convert_checkpoint.py", "--from=hf", "--to=ours", f"--input={r}/hf", f"--output={r}/ours"),
        ("convert_checkpoint.py", "--from=ours", "--to=savedmodel", f"--input={r}/ours", f"--output={r}/savedmodel",
         "--max_seq_length=16"),
    ]
    report = {"steps": [], "files": {}, "listing": {}}
    for script, *argv in steps:
        status, stderr = run_script(script, *argv)
        report["steps"].append({"script": script, "status": status, "stderr": stderr[-3000:]})
        if status:
            break
    for name in COMPARED:
        path = f"{r}/{name}"
        report["files"][name] = gfile.GFile(path, "rb").read().hex() if gfile.exists(path) else None
    for directory in ("pretrain", "classify", "export", "tf1", "hf", "ours", "savedmodel", "attention"):
        path = f"{r}/{directory}"
        report["listing"][directory] = sorted(gfile.listdir(path)) if gfile.isdir(path) else None
    report["served"] = {}
    for directory, signature in (("export", "classify"), ("savedmodel", "encode")):
        if report["listing"][directory]:
            served = tf.saved_model.load(f"{r}/{directory}/{report['listing'][directory][0]}")
            outputs = served.signatures[signature](text_a=tf.constant(["the cat sat on the mat", "a bad day"]))
            report["served"][directory] = {k: v.numpy().tolist() for k, v in sorted(outputs.items())
                                           if v.dtype != tf.string}
    with open(report_path, "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1].rstrip("/"), sys.argv[2])
