"""Activation functions by their `hidden_act` name.

`"gelu"` is the original BERT's tanh approximation (Hugging Face calls it `"gelu_new"`, which we
also accept). The exact erf GELU, which Hugging Face calls `"gelu"`, is `"gelu_exact"` here.
"""

import math
import types

from keras import ops


def gelu(x):
    """Tanh-approximate GELU, as the original `modeling.gelu`."""
    cdf = 0.5 * (1.0 + ops.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * ops.power(x, 3))))
    return x * cdf


def gelu_exact(x):
    """Exact GELU: `x * Phi(x)` with the normal CDF written through erf."""
    return 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))


def linear(x):
    return x


ACTIVATIONS = types.MappingProxyType({
    "linear": linear,
    "relu": ops.relu,
    "gelu": gelu,
    "gelu_new": gelu,
    "gelu_exact": gelu_exact,
    "tanh": ops.tanh,
    "swish": ops.silu,
})


def get_activation(name):
    """Maps a `hidden_act` string, in any case as the original, to a function (raises
    `ValueError` for an unknown name)."""
    key = name.lower() if isinstance(name, str) else name
    if key not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(sorted(ACTIVATIONS))}")
    return ACTIVATIONS[key]
