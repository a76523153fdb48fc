"""A user's first journey with the project installed from its wheel (`make test-wheel`), run by
that environment's Python from a directory outside the checkout:

    python tests/installed_journey.py TESTS_DATA_DIR --extras=none|chinese,plots

The console commands exist and answer `--help`; text becomes pretraining records, which train
two steps into a TF1 checkpoint; English reviews fine-tune a classifier; the packages import from
site-packages, and none of the project's inner packages is a top-level name there. With no
extras installed, what needs one (jieba's segmentation, the attention plots) says which in one
line; with them, it runs. Prints one line per check; exits 1 at the first that fails."""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.path.dirname(sys.executable)


def check(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}" + (f"\n{detail}" if not condition and detail else ""))
    if not condition:
        sys.exit(1)


def command(name, *flags):
    result = subprocess.run([os.path.join(BIN, name), *flags], capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def main(data, extras):
    work = tempfile.mkdtemp(prefix="installed-journey-")
    os.chdir(work)  # outside the checkout: only what was installed can be imported
    try:
        import bert_realformer
        import modeling
        for module in (bert_realformer, modeling):
            check(f"{module.__name__} imports from the installed package", "site-packages" in module.__file__,
                  module.__file__)
        inner = [name for name in ("training", "finetuning", "inference", "tasks", "pretraining", "comparison",
                                   "realdata", "commandline", "analysis", "cli")
                 if importlib.util.find_spec(name) is not None]
        check("no inner package is a top-level name", not inner, str(inner))

        status, output = command("bert-run-pretraining", "--help")
        check("bert-run-pretraining --help lists its flags and exits 0",
          status == 0 and "--bert_config_file" in output and "--save_checkpoints_steps" in output
          and "Traceback" not in output,
          output[-2000:])
        status, output = command("bert-create-pretraining-data", f"--input_file={data}/pretraining_data/input.txt",
                                 "--output_file=records/train.tfrecord",
                                 f"--vocab_file={data}/tokenization/vocab_en_uncased.txt", "--max_seq_length=64",
                                 "--max_predictions_per_seq=10", "--dupe_factor=1")
        check("bert-create-pretraining-data writes records", status == 0 and os.path.exists("records/train.tfrecord"),
              output[-2000:])
        with open("bert_config.json", "w") as config:
            json.dump({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "intermediate_size": 64, "max_position_embeddings": 64, "residual_attention": "sum"}, config)
        status, output = command("bert-run-pretraining", "--bert_config_file=bert_config.json",
                                 "--input_file=records/train.tfrecord", "--output_dir=out", "--do_train",
                                 "--num_train_steps=2", "--train_batch_size=4", "--max_seq_length=64",
                                 "--max_predictions_per_seq=10")
        check("bert-run-pretraining trains two steps into a TF1 checkpoint",
              status == 0 and os.path.exists("out/model.ckpt-2.index"), output[-2000:])
        status, output = command("bert-run-classifier", "--task_name=nope")
        check("a user mistake is one error line", status == 2 and output.strip().splitlines()[-1].startswith("error: "),
              output[-2000:])
        finetune(data)
        segmentation_and_plots(data, extras)
    finally:
        os.chdir("/")
        shutil.rmtree(work)


def finetune(data):
    """English reviews, a classifier fine-tuned from the tiny checkpoint and evaluated."""
    tiny = os.path.join(data, "bert_postln_tiny")
    os.makedirs("reviews")
    texts = ["a good film", "a bad film", "the best book", "the worst day", "a fine song", "a sad song"]
    for split in ("train", "dev"):
        with open(os.path.join("reviews", f"{split}.tsv"), "w") as f:
            f.writelines(f"{'good' if i % 2 == 0 else 'bad'}\t{text}\n" for i, text in enumerate(texts * 2))
    status, output = command("bert-run-classifier", "--task_name=thucnews", "--data_dir=reviews",
                             f"--vocab_file={tiny}/vocab.txt", f"--bert_config_file={tiny}/bert_config.json",
                             f"--init_checkpoint={tiny}/bert_model.ckpt", "--output_dir=classifier", "--do_train",
                             "--do_eval", "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1")
    check("bert-run-classifier fine-tunes and evaluates on English reviews",
          status == 0 and "eval_accuracy" in open("classifier/eval_results.txt").read(), output[-2000:])


def segmentation_and_plots(data, extras):
    """jieba's segmentation (the `chinese` extra) and the attention plots (`plots`): one line
    naming the extra without it, files with it."""
    with open("chinese.txt", "w", encoding="utf-8") as f:
        f.write("我们今天去公园散步。\n天气很好，大家都很开心。\n\n他喜欢读书。\n书店里人很多。\n")
    status, output = command("bert-create-pretraining-data", "--input_file=chinese.txt",
                             "--output_file=records/chinese.tfrecord", "--do_whole_word_mask",
                             "--chinese_word_segmentation=jieba",
                             f"--vocab_file={data}/tokenization/vocab_zh.txt", "--max_seq_length=32",
                             "--max_predictions_per_seq=5", "--dupe_factor=1")
    if "chinese" in extras:
        check("with the chinese extra, jieba segments for whole-word masking",
              status == 0 and os.path.exists("records/chinese.tfrecord"), output[-2000:])
    else:
        check("without the chinese extra, jieba's segmentation names it in one line",
              status == 2 and output.strip().splitlines()[-1] == "error: --chinese_word_segmentation=jieba needs "
              "jieba, which is not installed: pip install 'bert-realformer[chinese]'", output[-2000:])
    tiny = os.path.join(data, "bert_postln_tiny")
    with open("lines.txt", "w") as f:
        f.write("the cat sat on the mat\na big dog ran fast\n")
    status, output = command("bert-analyze-attention", f"--bert_config_file={tiny}/bert_config.json",
                             f"--init_checkpoint={tiny}/bert_model.ckpt", "--text_file=lines.txt",
                             f"--vocab_file={tiny}/vocab.txt", "--max_seq_length=16", "--output_dir=attention")
    if "plots" in extras:
        check("with the plots extra, the attention plots are drawn",
              status == 0 and any(name.endswith(".png") for name in os.listdir("attention")), output[-2000:])
    else:
        check("without the plots extra, the attention plots name it in one line",
              status == 2 and output.strip().splitlines()[-1] == "error: analyze_attention.py's plots needs "
              "matplotlib, which is not installed: pip install 'bert-realformer[plots]'", output[-2000:])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--extras", default="none", help="the extras installed: none, or chinese,plots")
    args = parser.parse_args()
    main(os.path.abspath(args.data), args.extras.split(","))
