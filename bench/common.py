"""What the benchmarks share: running one case in its own process, and the JSON report."""

import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

RESULT_PREFIX = "RESULT "
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bert_realformer.cpu_kernels import turn_on_onednn  # noqa: E402
from bert_realformer.cpus import cpu_description, cpu_summary  # noqa: E402

# TensorFlow's kernels as the scripts choose them on this CPU (oneDNN's on an AVX2-only one, where
# TensorFlow alone would run its own), for this process and every case process it starts: each
# bench imports this module before TensorFlow.
turn_on_onednn(os.environ)

VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")  # the 21128-token Chinese vocabulary
# A tiny RealFormer with the Chinese vocabulary: what the fine-tuning benchmarks train from scratch.
TINY_CHINESE_REALFORMER = {"vocab_size": 21128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                           "intermediate_size": 128, "max_position_embeddings": 128, "type_vocab_size": 2,
                           "residual_attention": "sum"}


def emit_result(result):
    """In a case's process: print the result for `run_case_process` to read."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# Lower-cased: XLA's status code, TensorFlow's and Python's error types (PyTorch's
# OutOfMemoryError too) and the messages of all three.
OUT_OF_MEMORY_MARKERS = ("resource_exhausted", "resourceexhaustederror", "memoryerror", "out of memory",
                         "oom when allocating")


def is_out_of_memory(error):
    """Whether `error` is a framework (XLA, TensorFlow, PyTorch) saying that memory ran out."""
    text = f"{type(error).__name__}: {error}".lower()
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


def emit_result_or_out_of_memory(measure):
    """In a case's process: emits `measure()`'s result, or `{"out_of_memory": true, "error"}`
    when it ran out of memory (any other error propagates: the case failed)."""
    try:
        result = measure()
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        result = {"out_of_memory": True, "error": str(error).strip().splitlines()[0][:300]}
    emit_result(result)


# The environment that keeps each framework's CPU kernels to AVX2 on a machine with AVX-512, to
# approximate an AVX2-only CPU (such as AMD Zen 3): oneDNN (TensorFlow's and PyTorch's), XLA's
# code generation, PyTorch's own vectorized kernels and MKL's (PyTorch's matrix products). ONNX
# Runtime has no such switch. Figures taken so are re-checked on an AVX2 machine. `avx2`: with
# oneDNN's kernels in TensorFlow, as the scripts run there (`bert_realformer.cpu_kernels`);
# `avx2-onednn-off`: with TensorFlow's own (Eigen's, compiled for AVX), TensorFlow's default
# there and what the scripts ran before they turned oneDNN on.
_AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",
         "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
MAX_ISA_ENV = {"avx2": {**_AVX2, "TF_ENABLE_ONEDNN_OPTS": "1"},
               "avx2-onednn-off": {**_AVX2, "TF_ENABLE_ONEDNN_OPTS": "0"},
               "native": {}}
# What those switches cannot keep to AVX2, as each picks its instructions from the CPU itself:
# XLA's matrix products (with --xla_cpu_max_isa=AVX2 they ran at 378-430 GFLOP/s where oneDNN kept
# to AVX2 reached 252: BENCHMARKS.md), XNNPACK's kernels (TensorFlow Lite, LiteRT), ONNX Runtime's.
NOT_KEPT_TO_MAX_ISA = "cannot be kept to an instruction set by --max_isa (its kernels pick them from the CPU itself)"


def run_case_process(cmd, env=None):
    """Runs `cmd` (a process that calls `emit_result`); returns its result dict, or None
    after printing the end of its stderr when it failed."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode or not lines:
        print(f"{' '.join(cmd[:3])} ... failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1][len(RESULT_PREFIX):])


def time_steps(step, steps, tokens_per_step, warmup=3):
    """Runs `step()` (returns something `float()` can wait on) `warmup` times, then times
    `steps` calls; returns {"median_step_s", "tokens_per_s"}."""
    for _ in range(warmup):
        float(step())
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        float(step())
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {"median_step_s": median, "tokens_per_s": tokens_per_step / median}


def write_report(path, benchmark, argv, **fields):
    """Writes the JSON report (date, machine with its CPU's model and instruction sets, exact
    command, fields) atomically."""
    report = {"benchmark": benchmark, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "cpu": cpu_description(), "cpu_count": os.cpu_count()},
              "command": shlex.join([f"bench/{benchmark}.py"] + list(argv)), **fields}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
    os.replace(path + ".tmp", path)
    print(f"wrote {path} (CPU: {cpu_summary(report['machine']['cpu'])})")


def peoples_daily_records(work_dir, seq_length, max_predictions=20, max_documents=650):
    """Pretraining TFRecords from People's Daily (the `realdata` corpus) made with our
    create_pretraining_data.py and the 21128-token Chinese vocabulary; returns the path."""
    from bert_realformer import realdata
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = os.path.join(work_dir, "corpus.txt")
    if not os.path.exists(corpus):
        realdata.write_peoples_daily_corpus(corpus, max_documents=max_documents)
    data = os.path.join(work_dir, f"train-{seq_length}-{max_predictions}.tfrecord")
    subprocess.run([sys.executable, os.path.join(root, "create_pretraining_data.py"),
                    f"--input_file={corpus}", f"--output_file={data}",
                    f"--vocab_file={os.path.join(root, 'tests', 'data', 'tokenization', 'vocab_zh.txt')}",
                    f"--max_seq_length={seq_length}", f"--max_predictions_per_seq={max_predictions}",
                    "--dupe_factor=1"], check=True, capture_output=True)
    return data


def fresh_work_dir(name, model):
    """bench/.work/NAME emptied and made again, with `model` written as its bert_config.json;
    returns (the directory, the config's path)."""
    work = os.path.join(ROOT, "bench", ".work", name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    config = os.path.join(work, "bert_config.json")
    with open(config, "w") as f:
        json.dump(model, f)
    return work, config
