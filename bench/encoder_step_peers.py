"""Encoder train-step throughput on this CPU: ours (post-LN and RealFormer, XLA off/on) vs
tf-models-official 2.20's BertEncoder (Keras 2, bench/.venv-tfm) vs Hugging Face transformers'
BertModel on PyTorch (bench/.venv-hf; eager and torch.compile), same shapes, batch and sequence
length, side by side in one run.

A step: forward of the encoder, a loss on its outputs (mean squared pooled output + mean
sequence output), backward, SGD update. Prints a table; writes bench/results/encoder_step_peers.json.

    python bench/encoder_step_peers.py [--config=small] [--batch_size=8] [--seq_length=128] [--rounds=3]
        [--max_isa=avx2]

`--max_isa=avx2` keeps every framework's kernels to AVX2 (`common.MAX_ISA_ENV`): an AVX-512
machine's approximation of an AVX2-only CPU; `--max_isa=avx2-onednn-off` with TensorFlow's own
kernels instead of oneDNN's (TensorFlow's default on such a CPU). XLA's matrix products cannot be
kept to AVX2 so: its cases are left out then.
"""

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)
PEERS = {  # framework: (its virtual environment's python, its script in bench/peers/)
    "tfm": (os.path.join(ROOT, "bench", ".venv-tfm", "bin", "python"), "tfm_encoder_step.py"),
    "pytorch": (os.path.join(ROOT, "bench", ".venv-hf", "bin", "python"), "hf_encoder_step.py"),
}

from common import (  # noqa: E402
    MAX_ISA_ENV,
    NOT_KEPT_TO_MAX_ISA,
    emit_result,
    run_case_process,
    time_steps,
    write_report,
)
from tf_step import encoder_output_loss, sgd_step  # noqa: E402


def ours(case):
    import numpy as np
    import tensorflow as tf
    from model_step import CONFIGS

    import modeling
    config = modeling.BertConfig(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
                                 residual_attention=case["residual_attention"], **CONFIGS[case["config"]])
    model = modeling.BertModel(config)
    batch, seq = case["batch_size"], case["seq_length"]
    rng = np.random.RandomState(0)
    inputs = {"input_ids": tf.constant(rng.randint(0, 30522, (batch, seq)), tf.int32),
              "input_mask": tf.ones((batch, seq), tf.int32), "token_type_ids": tf.zeros((batch, seq), tf.int32)}
    model(inputs)
    return sgd_step(lambda: encoder_output_loss(model(inputs, training=True)),
                    model.trainable_variables, case["xla"])


def run_case(case):
    emit_result(time_steps(ours(case), case["steps"], case["batch_size"] * case["seq_length"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="passes over all cases, interleaved")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "encoder_step_peers.json"))
    parser.add_argument("--max_isa", default="native", choices=sorted(MAX_ISA_ENV),
                        help="avx2: the kernels kept to AVX2 on an AVX-512 CPU (common.MAX_ISA_ENV; avx2-onednn-off: "
                             "with TensorFlow's own kernels); the XLA cases are left out")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(json.loads(args.case))
        return
    from model_step import CONFIGS
    base = {"config": args.config, "batch_size": args.batch_size, "seq_length": args.seq_length, "steps": args.steps}
    cases = [("ours post-LN", {"framework": "ours", "residual_attention": "none", "xla": False}),
             ("ours post-LN XLA", {"framework": "ours", "residual_attention": "none", "xla": True}),
             ("ours RealFormer", {"framework": "ours", "residual_attention": "sum", "xla": False}),
             ("ours RealFormer XLA", {"framework": "ours", "residual_attention": "sum", "xla": True}),
             ("tf-models BertEncoder", {"framework": "tfm", "xla": False}),
             ("tf-models BertEncoder XLA", {"framework": "tfm", "xla": True}),
             ("PyTorch transformers BertModel", {"framework": "pytorch"}),
             ("PyTorch transformers BertModel, torch.compile", {"framework": "pytorch", "compile": True})]
    if args.max_isa != "native":
        print(f"the XLA cases are left out: XLA {NOT_KEPT_TO_MAX_ISA}")
        cases = [(name, extra) for name, extra in cases if not extra.get("xla")]
    print(f"BERT-{args.config} shapes, batch {args.batch_size}, seq {args.seq_length}, this CPU "
          f"({os.cpu_count()} cores, instructions: {args.max_isa}), {args.rounds} round(s) over all cases, median kept")
    per_round = {name: [] for name, _ in cases}
    for round_index in range(args.rounds):  # interleaved: drift of the machine hits every case
        for name, extra in cases:
            case = {**base, **extra}
            if extra["framework"] in PEERS:
                python, script = PEERS[extra["framework"]]
                cmd = [python, os.path.join(ROOT, "bench", "peers", script),
                       json.dumps({**case, "shape": CONFIGS[args.config]})]
            else:
                cmd = [sys.executable, os.path.abspath(__file__), "--case", json.dumps(case)]
            measured = run_case_process(cmd, MAX_ISA_ENV[args.max_isa])
            if measured is not None:
                per_round[name].append(measured)
                print(f"round {round_index + 1}  {name:<32} {measured['median_step_s'] * 1e3:9.1f} ms "
                      f"{measured['tokens_per_s']:9.0f} tokens/s", flush=True)
    results = []
    for name, extra in cases:
        if per_round[name]:
            step_s = statistics.median(m["median_step_s"] for m in per_round[name])
            results.append({"name": name, **base, **extra, "median_step_s": step_s,
                            "tokens_per_s": args.batch_size * args.seq_length / step_s,
                            "rounds_step_s": [m["median_step_s"] for m in per_round[name]]})
    reference = next(r for r in results if r["name"] == "ours post-LN")
    for r in results:
        r["tokens_per_s_vs_ours_post_ln"] = r["tokens_per_s"] / reference["tokens_per_s"]
        print(f"{r['name']:<32} {r['median_step_s'] * 1e3:9.1f} ms {r['tokens_per_s']:9.0f} tokens/s "
              f"{r['tokens_per_s_vs_ours_post_ln']:6.3f} x ours post-LN")
    write_report(args.output, "encoder_step_peers", sys.argv[1:], max_isa=args.max_isa,
                 max_isa_env=MAX_ISA_ENV[args.max_isa], results=results)


if __name__ == "__main__":
    main()
