#!/usr/bin/env bash
# The GPU figures of BENCHMARKS.md in one go, on the Keras JAX backend with bf16 mixed precision.
# Usage: bench/run_gpu.sh [RESULTS_DIR]   (default bench/results; needs jax, keras, torch, transformers)
set -u
cd "$(dirname "$0")/.."
out=${1:-bench/results}
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
step() { python3 bench/model_step.py --dtype_policy=mixed_bfloat16 --variants=post-LN,RealFormer-sum \
    --peak_matmul_size=8192 "$@"; }
step --config=large --seq_length=128 --batch_size=64 --pytorch_python=python3 --output="$out/model_step-gpu-large-128.json"
step --config=base --seq_length=128 --batch_size=64 --pytorch_python=python3 --output="$out/model_step-gpu-base-128.json"
step --config=base --seq_length=512 --batch_size=32 --pytorch_python=python3 --output="$out/model_step-gpu-base-512.json"
step --config=large --seq_length=512 --batch_size=32,64 --pytorch_python=python3 --output="$out/model_step-gpu-large-512.json"
step --config=large --seq_length=128 --batch_size=256 --output="$out/model_step-gpu-large-128-b256.json"
