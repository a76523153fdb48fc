"""Our AdamW with bias correction against PyTorch's `torch.optim.AdamW`, an independent
implementation: the same weights after several steps, with weight decay on the kernels and
none on LayerNorm and bias weights (a parameter group with weight_decay=0), a learning rate that
changes every step (warmup, then decay) and gradients clipped to global norm 1."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_realformer.training.optimization import AdamWeightDecay, WarmupLinearDecay, clip_by_global_norm

pytestmark = pytest.mark.slow  # PyTorch: the `oracles` extra (Python 3.11 only)


def test_bias_corrected_adamw_equals_torch_adamw():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    shapes = {"dense_kernel": (4, 3), "LayerNorm_gamma": (3,), "dense_bias": (3,)}
    start = {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}
    steps, lr = 8, 0.05
    schedule = WarmupLinearDecay(lr, num_train_steps=steps, num_warmup_steps=2)
    ours = {name: keras.Variable(value, name=name) for name, value in start.items()}
    optimizer = AdamWeightDecay(learning_rate=schedule, weight_decay_rate=0.01, bias_correction=True)
    theirs = {name: torch.nn.Parameter(torch.tensor(value)) for name, value in start.items()}
    decayed = [theirs["dense_kernel"]]
    excluded = [theirs["LayerNorm_gamma"], theirs["dense_bias"]]
    reference = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.01},
                                   {"params": excluded, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999), eps=1e-6)
    for step in range(steps):
        grads = {name: (3.0 * rng.normal(size=shape)).astype("float32") for name, shape in shapes.items()}
        clipped, _ = clip_by_global_norm([tf.constant(g) for g in grads.values()])
        optimizer.apply_gradients(zip(clipped, ours.values()))
        for group in reference.param_groups:
            group["lr"] = float(schedule(step))
        for parameter, g in zip(theirs.values(), clipped):
            parameter.grad = torch.tensor(g.numpy())
        reference.step()
    assert not np.allclose(ours["dense_kernel"].numpy(), start["dense_kernel"], atol=1e-2)  # it moved
    for name in shapes:
        np.testing.assert_allclose(ours[name].numpy(), theirs[name].detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
