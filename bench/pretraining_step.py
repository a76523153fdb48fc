"""Pretraining steps/s and examples/s: post-LN, pre-LN, RealFormer and PLD, side by side.

All cases train on the same real TFRecords (People's Daily, made here with
create_pretraining_data.py and the 21128-token Chinese vocabulary, read by run_pretraining's
input pipeline) with the same config and batch, through the train step run_pretraining.py's
driver runs (`TrainLoop.train_step`: the loss, AdamW, clipping), called one step at a time; the
driver's own cost on top of it is `bench/driver_overhead.py`'s figure. Each case runs in
its own process, so its peak memory is its own. PLD is measured at optimizer step 10,000, where
theta(t) is near theta_bar and about a third of the layer computations are skipped.

    python bench/pretraining_step.py [--config=small] [--batch_size=16] [--steps=15]
    python bench/pretraining_step.py --config=demo --batch_size=32 --seq_length=64 \
      --max_predictions=10 --vocab_sizes=21128,1000 --cases=post-LN,RealFormer   # make study's step

--vocab_sizes measures each case with other vocabulary sizes too (token ids of the records taken
modulo the size): the share of the step that grows with the vocabulary (word embeddings, the MLM
output layer, their gradients and AdamW update). `--max_isa=avx2` keeps the kernels to AVX2 on
an AVX-512 CPU (an approximation of an AVX2-only one, such as AMD Zen 3); `--max_isa=avx2-onednn-off`
with TensorFlow's own kernels instead of oneDNN's (`common.MAX_ISA_ENV`).

Prints a table; writes bench/results/pretraining_step.json.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import (  # noqa: E402
    MAX_ISA_ENV,
    NOT_KEPT_TO_MAX_ISA,
    emit_result,
    peoples_daily_records,
    run_case_process,
    write_report,
)

CASES = {
    "post-LN": dict(layer_norm_type="post", residual_attention="none", pld=False),
    "pre-LN": dict(layer_norm_type="pre", residual_attention="none", pld=False),
    "RealFormer": dict(layer_norm_type="post", residual_attention="sum", pld=False),
    "pre-LN + PLD": dict(layer_norm_type="pre", residual_attention="none", pld=True),
    "RealFormer + PLD": dict(layer_norm_type="post", residual_attention="sum", pld=True),
}


def run_case(case):
    import keras
    import tensorflow as tf
    from model_step import CONFIGS

    import modeling
    from bert_realformer.pretraining import pld
    from bert_realformer.pretraining.input_pipeline import make_dataset
    from bert_realformer.pretraining.losses import pretraining_totals, replica_pretraining_loss
    from bert_realformer.training.optimization import create_optimizer
    from bert_realformer.training.trainer import TrainLoop
    keras.utils.set_random_seed(0)
    variant = CASES[case["name"]]
    config = modeling.BertConfig(vocab_size=case["vocab_size"], max_position_embeddings=512, type_vocab_size=2,
                                 layer_norm_type=variant["layer_norm_type"],
                                 residual_attention=variant["residual_attention"],
                                 **CONFIGS[case["config"]])
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = modeling.BertPretrainer(config)
        model.build()
        optimizer = create_optimizer(1e-4, 100000, 1000)

        def loss_fn(model, features, step, totals):
            keep = (pld.keep_probabilities(step, config.num_hidden_layers, 0.5, 0.001)
                    if variant["pld"] else None)
            return replica_pretraining_loss(model(features, training=True, layer_keep_probs=keep),
                                            features, totals)

        loop = TrainLoop(strategy, model, optimizer, loss_fn, pretraining_totals, use_xla=case["xla"])
    if variant["pld"]:
        optimizer.iterations.assign(10000)
    dataset = make_dataset([case["data"]], case["batch_size"], case["seq_length"], case["max_predictions"], True,
                           seed=0)
    if case["vocab_size"] < 21128:
        ids = ("input_ids", "masked_lm_ids")
        dataset = dataset.map(lambda f: {k: v % case["vocab_size"] if k in ids else v for k, v in f.items()})
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    for _ in range(3):
        loop.train_step(iterator)
    times = []
    for _ in range(case["steps"]):
        start = time.perf_counter()
        float(loop.train_step(iterator)["loss"])
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {**case, "median_step_s": median, "steps_per_s": 1 / median,
            "examples_per_s": case["batch_size"] / median,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--max_predictions", type=int, default=20)
    parser.add_argument("--vocab_sizes", default="21128")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "pretraining_step.json"))
    parser.add_argument("--max_isa", default="native", choices=sorted(MAX_ISA_ENV),
                        help="avx2: the kernels kept to AVX2 on an AVX-512 CPU (common.MAX_ISA_ENV; avx2-onednn-off: "
                             "with TensorFlow's own kernels); not with --xla")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        emit_result(run_case(json.loads(args.case)))
        return
    if args.xla and args.max_isa != "native":
        parser.error(f"--max_isa: XLA {NOT_KEPT_TO_MAX_ISA}")

    data = peoples_daily_records(tempfile.mkdtemp(prefix="bench-pretraining-"), args.seq_length, args.max_predictions)
    results = []
    print(f"BERT-{args.config} shapes, batch {args.batch_size}, seq {args.seq_length}, XLA {args.xla}, "
          f"instructions: {args.max_isa}")
    print(f"{'case':<18} {'vocab':>6} {'step ms':>9} {'steps/s':>8} {'examples/s':>11} {'vs first':>9} {'peak MB':>8}")
    for vocab_size in (int(v) for v in args.vocab_sizes.split(",")):
        for name in args.cases.split(","):
            case = {"name": name, "config": args.config, "batch_size": args.batch_size, "vocab_size": vocab_size,
                    "seq_length": args.seq_length, "max_predictions": args.max_predictions, "steps": args.steps,
                    "xla": args.xla, "data": data}
            result = run_case_process([sys.executable, os.path.abspath(__file__), "--case", json.dumps(case)],
                                      MAX_ISA_ENV[args.max_isa])
            if result is None:
                raise SystemExit(f"{name} failed")
            first = results[0] if results else result
            result["step_time_vs_first"] = result["median_step_s"] / first["median_step_s"]
            results.append(result)
            print(f"{name:<18} {vocab_size:6d} {result['median_step_s'] * 1e3:9.1f} {result['steps_per_s']:8.2f} "
                  f"{result['examples_per_s']:11.1f} {result['step_time_vs_first']:9.3f} "
                  f"{result['peak_rss_mb']:8.0f}", flush=True)
    write_report(args.output, "pretraining_step", sys.argv[1:], max_isa=args.max_isa, results=results)


if __name__ == "__main__":
    main()
