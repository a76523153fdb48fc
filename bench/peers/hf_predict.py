"""Prediction with Hugging Face transformers' BertForSequenceClassification on PyTorch (eager or
torch.compile) or with the same model exported to ONNX and run by ONNX Runtime, in
bench/.venv-hf. Prints `RESULT {json}` with examples/s and the probabilities.

    python hf_predict.py CASE.json  # {"runtime": "eager"|"compile"|"onnxruntime"|"onnxruntime-int8",
                                    #  "model_dir": ..., "texts": [...], "seq_length": 128, "batch_size": 8,
                                    #  "rounds": 2, "work_dir": ..., "threads": 0}

Each batch is tokenized beforehand (the tokenizer's usual `padding="longest"`, truncated to
`seq_length`), so what is timed is the model alone.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import emit_result  # noqa: E402


def main():
    with open(sys.argv[1]) as f:  # the case, as JSON
        case = json.load(f)
    import numpy as np
    import torch
    import transformers
    if case.get("threads"):
        torch.set_num_threads(case["threads"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(case["model_dir"])
    model = transformers.BertForSequenceClassification.from_pretrained(case["model_dir"]).eval()
    texts, size = case["texts"], case["batch_size"]
    batches = [tokenizer(texts[i:i + size], padding="longest", truncation=True, max_length=case["seq_length"],
                         return_tensors="pt") for i in range(0, len(texts), size)]
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    if case["runtime"].startswith("onnxruntime"):
        import onnxruntime
        path = os.path.join(case["work_dir"], "model.onnx")
        if not os.path.exists(path):
            sample = batches[0]
            torch.onnx.export(model, (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]), path,
                              input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
                              dynamic_axes={name: {0: "batch", 1: "sequence"}
                                            for name in ("input_ids", "attention_mask", "token_type_ids")},
                              opset_version=17, dynamo=False)
        if case["runtime"] == "onnxruntime-int8":  # weights int8, activations quantized as they come
            from onnxruntime.quantization import QuantType, quantize_dynamic
            quantized = os.path.join(case["work_dir"], "model.int8.onnx")
            if not os.path.exists(quantized):
                quantize_dynamic(path, quantized, weight_type=QuantType.QInt8)
            path = quantized
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = case.get("threads", 0)  # (0: ONNX Runtime's default)
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        versions["onnxruntime"] = onnxruntime.__version__

        def run(batch):
            logits = session.run(["logits"], {k: batch[k].numpy() for k in
                                              ("input_ids", "attention_mask", "token_type_ids")})[0]
            return torch.softmax(torch.from_numpy(logits), -1).numpy()
    else:
        forward = torch.compile(model) if case["runtime"] == "compile" else model

        def run(batch):
            with torch.inference_mode():
                return torch.softmax(forward(**batch).logits, -1).numpy()

    run(batches[0])  # warm-up (compilation, first-call allocations)
    rounds = []
    for _ in range(case["rounds"]):
        start = time.perf_counter()
        probabilities = np.concatenate([run(batch) for batch in batches])
        rounds.append(time.perf_counter() - start)
    emit_result({"examples_per_s": len(texts) / min(rounds), "ms_per_batch": 1000 * min(rounds) * size / len(texts),
                 "seconds": rounds,
                 "probabilities": probabilities.tolist(), **versions})


if __name__ == "__main__":
    main()
