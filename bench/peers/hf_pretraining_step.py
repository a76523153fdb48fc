"""The PyTorch peer of bench/model_step.py: Hugging Face transformers' BertModel with PyTorch's
fused attention (`attn_implementation="sdpa"`), plus the MLM head on the masked positions only
and the NSP head, as ours; same loss, SGD update. bf16/fp16 autocast for the mixed policies; the
GPU when there is one. Prints `RESULT {json}`.

    python hf_pretraining_step.py '{"shape": {...}, "seq_length": 128, "batch_size": 64,
        "predictions": 20, "dtype_policy": "mixed_bfloat16", "steps": 10, "warmup": 2,
        "vocab_size": 30522}'
"""

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import emit_result_or_out_of_memory, time_steps  # noqa: E402


def main():
    case = json.loads(sys.argv[1])
    emit_result_or_out_of_memory(lambda: measure(case))


def measure(case):
    """Builds the model and batch of `case` and times its train step; returns the result."""
    import torch
    import transformers
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape, vocab = case["shape"], case["vocab_size"]
    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=shape["hidden_size"], num_hidden_layers=shape["num_hidden_layers"],
        num_attention_heads=shape["num_attention_heads"], intermediate_size=shape["intermediate_size"],
        max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu_new")
    torch.manual_seed(0)
    model = transformers.BertForPreTraining._from_config(config, attn_implementation="sdpa").to(device)
    model.train()
    batch, seq, predictions = case["batch_size"], case["seq_length"], case["predictions"]
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    mask = torch.ones((batch, seq), dtype=torch.long, device=device)
    segments = (torch.arange(seq, device=device)[None, :] >= seq // 2).long().repeat(batch, 1)
    positions = torch.randint(0, seq, (batch, predictions), device=device)
    labels = torch.randint(0, vocab, (batch, predictions), device=device)
    next_sentence = torch.randint(0, 2, (batch,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    autocast_dtype = {"mixed_bfloat16": torch.bfloat16, "mixed_float16": torch.float16}.get(case["dtype_policy"])
    rows = torch.arange(batch, device=device)[:, None]

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            out = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=segments)
            masked = out.last_hidden_state[rows, positions]            # [B, P, H]
            mlm_logits = model.cls.predictions(masked)                 # [B, P, V]
            nsp_logits = model.cls.seq_relationship(out.pooler_output)  # [B, 2]
            loss = torch.nn.functional.cross_entropy(mlm_logits.float().reshape(-1, vocab), labels.reshape(-1)) \
                + torch.nn.functional.cross_entropy(nsp_logits.float(), next_sentence)
        loss.backward()
        optimizer.step()
        return loss

    def synchronized_step():
        loss = step()
        if device == "cuda":
            torch.cuda.synchronize()
        return float(loss)

    start = time.perf_counter()
    synchronized_step()
    first = time.perf_counter() - start
    timed = time_steps(synchronized_step, case["steps"], batch * seq, warmup=case["warmup"])
    memory = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
              else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"backend": f"torch {torch.__version__} ({device})", "transformers": transformers.__version__,
            "first_step_s": first, **timed, "sequences_per_s": batch / timed["median_step_s"],
            "peak_memory_mb": memory, "final_loss": synchronized_step(),
            "memory_kind": "device" if device == "cuda" else "host RSS"}


if __name__ == "__main__":
    main()
