#!/usr/bin/env bash
# The GPU figures of BENCHMARKS.md, on the Keras JAX backend with bf16 mixed precision.
# Usage: bench/run_gpu.sh [RESULTS_DIR] [table|max-batch|all]
#   table (default): every variant and the PyTorch peer at the table's sizes and batches;
#   max-batch: the largest batch that fits at seq 512, per variant and for the peer (BERT-Large,
#   then BERT-Base; each probe is a whole case, about a minute for BERT-Large).
# Needs jax, keras, torch and transformers.
set -u
cd "$(dirname "$0")/.."
out=${1:-bench/results}
part=${2:-table}
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
step() { python3 bench/model_step.py --dtype_policy=mixed_bfloat16 --variants=post-LN,pre-LN,RealFormer-sum \
    --peak_matmul_size=8192 "$@"; }
case $part in table|max-batch|all) ;; *) echo "run_gpu.sh: unknown part '$part' (table, max-batch or all)" >&2; exit 2;; esac
if [[ $part == table || $part == all ]]; then
    step --config=large --seq_length=128 --batch_size=64 --pytorch_python=python3 --output="$out/model_step-gpu-large-128.json"
    step --config=base --seq_length=128 --batch_size=64 --pytorch_python=python3 --output="$out/model_step-gpu-base-128.json"
    step --config=base --seq_length=512 --batch_size=32 --pytorch_python=python3 --output="$out/model_step-gpu-base-512.json"
    step --config=large --seq_length=512 --batch_size=32,64 --pytorch_python=python3 --output="$out/model_step-gpu-large-512.json"
    step --config=large --seq_length=128 --batch_size=256 --output="$out/model_step-gpu-large-128-b256.json"
fi
if [[ $part == max-batch || $part == all ]]; then
    step --config=large --seq_length=512 --batch_size=64 --max_batch --batch_multiple=8 --steps=5 --warmup=1 \
        --pytorch_python=python3 --output="$out/model_step-gpu-large-512-max-batch.json"
    step --config=base --seq_length=512 --batch_size=128 --max_batch --batch_multiple=16 --steps=5 --warmup=1 \
        --pytorch_python=python3 --output="$out/model_step-gpu-base-512-max-batch.json"
fi
