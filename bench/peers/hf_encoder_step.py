"""Hugging Face transformers' BertModel train step on PyTorch (forward + backward of the same
pooled/sequence-output loss as ours, SGD update), eager or with the model under `torch.compile`
(`"compile": true`; compiled during the warm-up steps), run in bench/.venv-hf. Prints `RESULT {json}`.

    python hf_encoder_step.py '{"shape": {...}, "batch_size": 8, "seq_length": 128, "steps": 10}'
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import emit_result, time_steps  # noqa: E402


def main():
    case = json.loads(sys.argv[1])
    import torch
    import transformers
    shape = case["shape"]
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(
        vocab_size=30522, hidden_size=shape["hidden_size"], num_hidden_layers=shape["num_hidden_layers"],
        num_attention_heads=shape["num_attention_heads"], intermediate_size=shape["intermediate_size"],
        max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu_new"))
    model.train()
    batch, seq = case["batch_size"], case["seq_length"]
    ids = torch.randint(0, 30522, (batch, seq))
    mask = torch.ones((batch, seq), dtype=torch.long)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    forward = torch.compile(model) if case.get("compile") else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        out = forward(input_ids=ids, attention_mask=mask)
        loss = out.pooler_output.square().mean() + out.last_hidden_state.mean()
        loss.backward()
        optimizer.step()
        return float(loss)

    emit_result({**time_steps(step, case["steps"], batch * seq), "torch": torch.__version__,
                 "transformers": transformers.__version__})


if __name__ == "__main__":
    main()
