"""One matrix product of a serving request's shape, float32 and dynamic-range int8, in TensorFlow
Lite (XNNPACK's kernels, what `--tflite_prediction --quantize=int8` runs) and in ONNX Runtime (its
MLAS kernels, `quantize_dynamic`): how much each runtime's int8 kernel gains over its own float32
on this CPU, apart from any graph around it.

    python bench/int8_products.py [--shapes=32x512x2048,32x2048x512,32x512x512,128x512x2048]
                                  [--calls=200] [--tag=TAG]

A shape MxKxN is x [M, K] times a weight [K, N] (BERT-Small's intermediate, output and attention
products at 32 and 128 tokens); the same random weights in both runtimes, 2 threads each. Prints
ms per product (best of 5 rounds of `--calls` after 50 warm-up calls) and GFLOP/s; writes
bench/results/int8_products[-TAG].json. ONNX Runtime's case runs in bench/.venv-hf (`make
bench-peers`).
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import emit_result, run_case_process, write_report  # noqa: E402

HF_PYTHON = os.path.join(ROOT, "bench", ".venv-hf", "bin", "python")
WORK = os.path.join(ROOT, "bench", ".work", "int8_products")
THREADS = 2


def best_ms(call, calls):
    """The best of 5 rounds of `calls` calls of `call()` after 50 warm-up calls, ms per call."""
    for _ in range(50):
        call()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls)
    return 1000 * best


def shape_of(text):
    """"MxKxN" -> (M, K, N)."""
    return tuple(int(n) for n in text.split("x"))


def weight_file(shape):
    return os.path.join(WORK, "w-{}x{}x{}.npy".format(*shape))


def _times(weight):
    """x -> x @ weight, the weight a constant of the graph."""
    import tensorflow as tf
    weight = tf.constant(weight)
    return lambda x: tf.matmul(x, weight)


def lite_case(shapes, calls):
    """{shape: {"float32": ms, "int8": ms}} by TensorFlow Lite's interpreter."""
    import warnings

    import numpy as np
    import tensorflow as tf
    results = {}
    for text in shapes:
        m, k, n = shape_of(text)
        product = tf.function(_times(np.load(weight_file((m, k, n)))),
                              input_signature=[tf.TensorSpec([m, k], tf.float32)])
        x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
        results[text] = {}
        for precision in ("float32", "int8"):
            converter = tf.lite.TFLiteConverter.from_concrete_functions([product.get_concrete_function()], tf.Module())
            if precision == "int8":
                converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic-range int8
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                interpreter = tf.lite.Interpreter(model_content=converter.convert(), num_threads=THREADS)
            interpreter.allocate_tensors()
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
            results[text][precision] = best_ms(interpreter.invoke, calls)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="32x512x2048,32x2048x512,32x512x512,128x512x2048")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tag", default="")
    parser.add_argument("--case", choices=["tflite"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    if args.case:
        emit_result(lite_case(shapes, args.calls))
        return
    import numpy as np
    os.makedirs(WORK, exist_ok=True)
    rng = np.random.default_rng(0)
    for text in shapes:
        _, k, n = shape_of(text)
        np.save(weight_file(shape_of(text)), (rng.standard_normal((k, n)) * 0.05).astype(np.float32))
    common = ["--shapes=" + args.shapes, f"--calls={args.calls}"]
    runtimes = {"tensorflow-lite": run_case_process([sys.executable, __file__, "--case=tflite", *common]),
                "onnxruntime": run_case_process([HF_PYTHON, os.path.join(ROOT, "bench", "peers", "ort_products.py"),
                                                 WORK, *common])}
    if None in runtimes.values():
        raise SystemExit("a case failed (above)")
    rows = []
    for text in shapes:
        m, k, n = shape_of(text)
        row = {"shape": text}
        for runtime, results in runtimes.items():
            for precision, ms in results[text].items():
                row[f"{runtime} {precision} ms"] = ms
                row[f"{runtime} {precision} GFLOP/s"] = 2 * m * k * n / ms / 1e6
            row[f"{runtime} int8 gain"] = results[text]["float32"] / results[text]["int8"]
        row["onnxruntime int8 over tensorflow-lite int8"] = row["tensorflow-lite int8 ms"] / row["onnxruntime int8 ms"]
        rows.append(row)
        print(f"{text:>14}  " + "   ".join(
            f"{runtime} float32 {row[f'{runtime} float32 ms']:.3f} ms, int8 {row[f'{runtime} int8 ms']:.3f} ms "
            f"({row[f'{runtime} int8 gain']:.2f}x)" for runtime in runtimes)
            + f"   onnxruntime int8 {row['onnxruntime int8 over tensorflow-lite int8']:.2f}x tensorflow-lite's")
    name = "int8_products" + (f"-{args.tag}" if args.tag else "")
    write_report(os.path.join(ROOT, "bench", "results", f"{name}.json"), "int8_products", sys.argv[1:],
                 threads=THREADS, rows=rows)


if __name__ == "__main__":
    main()
