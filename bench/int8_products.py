"""One matrix product of a serving request's shape, float32 and dynamic-range int8, in TensorFlow
Lite (XNNPACK's kernels, what `--tflite_prediction --quantize=int8` runs) and in ONNX Runtime (its
MLAS kernels, `quantize_dynamic`): how much each runtime's int8 kernel gains over its own float32
on this CPU, apart from any graph around it. Beside them the float32 product of TensorFlow's
graph, as prediction's graph runs it (the weight a variable, its bias added by the same kernel),
with oneDNN's kernel (what the scripts run on x86 CPUs with AVX2) and with TensorFlow's own.

    python bench/int8_products.py [--shapes=32x512x2048,32x2048x512,32x512x512,128x512x2048,1024x512x2048]
                                  [--calls=200] [--tag=TAG]

A shape MxKxN is x [M, K] times a weight [K, N] (BERT-Small's intermediate, output and attention
products at 32 and 128 tokens, and the intermediate one of a batch of 8 x 128 tokens); the same
random weights in every runtime, 2 threads each. Prints ms per product (best of 5 rounds of
`--calls` after 50 warm-up calls) and GFLOP/s; writes bench/results/int8_products[-TAG].json.
ONNX Runtime's case runs in bench/.venv-hf (`make bench-peers`).
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
GRAPH_PRODUCTS = 10  # products per call of the graph's function: its call's own cost spread over them
GRAPH_KERNELS = {"tensorflow-onednn": "1", "tensorflow-own": "0"}  # (TF_ENABLE_ONEDNN_OPTS for each)


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


def graph_case(shapes, calls):
    """{shape: {"float32": ms}} by TensorFlow's graph (`_graph_products`), per product."""
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    results = {}
    for text in shapes:
        call = _graph_products(shape_of(text))
        results[text] = {"float32": best_ms(call, max(1, calls // GRAPH_PRODUCTS)) / GRAPH_PRODUCTS}
    return results


def _graph_products(shape):
    """A call of `GRAPH_PRODUCTS` products of x [M, K] by as many variables (copies of the weight;
    one would let the graph share the products) in one function, run one after another (one
    inter-op thread, `THREADS` for each product), each with its bias as a `Dense` layer adds it."""
    import numpy as np
    import tensorflow as tf
    m, k, n = shape
    weights = [tf.Variable(np.load(weight_file(shape))) for _ in range(GRAPH_PRODUCTS)]
    bias = tf.Variable(np.zeros(n, np.float32))
    x = tf.constant(np.random.default_rng(1).standard_normal((m, k)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([m, k], tf.float32)])
    def products(x):
        return tf.add_n([tf.nn.bias_add(tf.matmul(x, w), bias)[:1] for w in weights])
    return lambda: products(x).numpy()


def _summary(row, runtime):
    """"RUNTIME float32 A ms, int8 B ms (Cx)", or its float32 part alone."""
    text = f"{runtime} float32 {row[f'{runtime} float32 ms']:.3f} ms"
    if f"{runtime} int8 ms" in row:
        text += f", int8 {row[f'{runtime} int8 ms']:.3f} ms ({row[f'{runtime} int8 gain']:.2f}x)"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="32x512x2048,32x2048x512,32x512x512,128x512x2048,1024x512x2048")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tag", default="")
    parser.add_argument("--case", choices=["tflite", "graph"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    if args.case:
        emit_result((lite_case if args.case == "tflite" else graph_case)(shapes, args.calls))
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
                                                 WORK, *common]),
                **{name: run_case_process([sys.executable, __file__, "--case=graph", *common],
                                          env={"TF_ENABLE_ONEDNN_OPTS": switch})
                   for name, switch in GRAPH_KERNELS.items()}}
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
            if "int8" in results[text]:
                row[f"{runtime} int8 gain"] = results[text]["float32"] / results[text]["int8"]
        row["onnxruntime int8 over tensorflow-lite int8"] = row["tensorflow-lite int8 ms"] / row["onnxruntime int8 ms"]
        row["onnxruntime float32 over tensorflow-onednn float32"] = (row["tensorflow-onednn float32 ms"]
                                                                    / row["onnxruntime float32 ms"])
        rows.append(row)
        print(f"{text:>14}  " + "   ".join(_summary(row, runtime) for runtime in runtimes)
              + f"   onnxruntime int8 {row['onnxruntime int8 over tensorflow-lite int8']:.2f}x tensorflow-lite's")
    name = "int8_products" + (f"-{args.tag}" if args.tag else "")
    write_report(os.path.join(ROOT, "bench", "results", f"{name}.json"), "int8_products", sys.argv[1:],
                 threads=THREADS, rows=rows)


if __name__ == "__main__":
    main()
