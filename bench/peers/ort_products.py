"""`bench/int8_products.py`'s ONNX Runtime case, in bench/.venv-hf: each shape's product as an
ONNX MatMul (opset 17) of the weights that script wrote, and the same quantized by
`quantize_dynamic` (int8 weights, the input quantized per call). Prints `RESULT {json}`:
{shape: {"float32": ms, "int8": ms}}.

    python ort_products.py WORK_DIR --shapes=32x512x2048,... --calls=200
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import emit_result  # noqa: E402
from int8_products import THREADS, best_ms, shape_of, weight_file  # noqa: E402


def session(path):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work_dir")
    parser.add_argument("--shapes")
    parser.add_argument("--calls", type=int)
    args = parser.parse_args()
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic
    results = {}
    for text in args.shapes.split(","):
        m, k, n = shape_of(text)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "weight"], ["y"])], "product",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                                  [numpy_helper.from_array(np.load(weight_file((m, k, n))), "weight")])
        float_path, int8_path = (os.path.join(args.work_dir, f"{text}.{p}.onnx") for p in ("float32", "int8"))
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), float_path)
        quantize_dynamic(float_path, int8_path, weight_type=QuantType.QInt8)
        x = {"x": np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)}
        results[text] = {}
        for precision, path in (("float32", float_path), ("int8", int8_path)):
            runner = session(path)
            results[text][precision] = best_ms(lambda: runner.run(None, x), args.calls)  # noqa: B023 (called here)
    emit_result(results)


if __name__ == "__main__":
    main()
