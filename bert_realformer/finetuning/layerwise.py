"""Treating the encoder's layers by depth when fine-tuning (Zhang et al. 2021, "Revisiting
Few-sample BERT Fine-tuning"; Clark et al. 2020, ELECTRA):

* layer-wise learning-rate decay: the task's head and the pooler (and Pre-LN's final LayerNorm,
  which sits on the top layer's output) learn at the full rate, the top encoder layer at `decay`
  times it, each layer below at `decay` times the one above, the embeddings lowest:
  layer i of L (from 0) at decay^(L - i), the embeddings at decay^(L + 1);
* re-initialising the top N layers and the pooler before training, with the config's
  initializer (truncated normal of `initializer_range`; LayerNorm gamma 1, beta and biases 0),
  as a layer that was never pretrained would start.

Both find a weight's place by its TF1 name (`BertModel.tf1_names`), the same for every variant,
and take part in a run as one training hook (`LayerwiseTraining`). Where ALBERT's layers share
weights by groups, a group learns at the rate of the highest layer that runs it (its embedding
projection with the embeddings); its top layers cannot be re-initialised alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import keras

from bert_realformer.training.hooks import HookRun, TrainingHook

if TYPE_CHECKING:  # annotations only
    from modeling import BertConfig

_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")
_GROUP = re.compile(r"^bert/encoder/transformer/group_(\d+)/")


def depth(tf1_name: str, num_layers: int, num_groups: int | None = None) -> int:
    """How many steps below the top a weight sits: 0 for the head, the pooler and the encoder's
    final LayerNorm; L - i for a weight of layer i (of ALBERT's group of `num_groups`: i the
    highest layer running it); L + 1 for the embeddings (and ALBERT's projection of them)."""
    layer = _LAYER.match(tf1_name)
    if layer:
        return num_layers - int(layer.group(1))
    group = _GROUP.match(tf1_name)
    if group:  # layer i runs group i * G // L: the group's highest layer is ceil((g + 1) L / G) - 1
        highest = ((int(group.group(1)) + 1) * num_layers + num_groups - 1) // num_groups - 1
        return num_layers - highest
    if tf1_name.startswith(("bert/embeddings/", "bert/encoder/embedding_hidden_mapping_in/")):
        return num_layers + 1
    return 0


def _names_of(model: keras.Model) -> dict[int, str]:
    """{id of a trainable variable: its TF1 name}."""
    return {id(variable): name for name, variable in model.tf1_names()}


def learning_rate_multipliers(model: keras.Model, decay: float) -> list[float] | None:
    """decay^depth for each of `model.trainable_variables`, in that order (the order the
    optimizer is built with); None for `decay` 1 (one rate for all)."""
    if decay == 1.0:
        return None
    names = _names_of(model)
    config = model.config
    return [decay ** depth(names[id(variable)], config.num_hidden_layers, config.num_hidden_groups)
            for variable in model.trainable_variables]


def top_layer_names(model: keras.Model, num_layers: int) -> list[str]:
    """The TF1 names of the weights `reinitialize_top_layers` sets: those of the top
    `num_layers` encoder layers, the pooler and the encoder's final LayerNorm."""
    total = model.config.num_hidden_layers
    return [name for name in _names_of(model).values()
            if (name.startswith(("bert/pooler/", "bert/encoder/LayerNorm/"))
                or (_LAYER.match(name) and depth(name, total) <= num_layers))]


def initial_value(name: str, shape, config: BertConfig, seed: int):
    """What the original's initializers give the weight `name` of `shape`: LayerNorm gamma 1,
    beta and biases 0, every other weight (kernels) a truncated normal of the config's
    `initializer_range` (drawn from `seed`)."""
    if name.endswith("/gamma"):
        return keras.ops.ones(shape)
    if name.endswith(("/beta", "/bias")):
        return keras.ops.zeros(shape)
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range, seed=seed)(shape)


def reinitialize_top_layers(model: keras.Model, num_layers: int, seed: int) -> list[str]:
    """Sets the weights of `top_layer_names` to `initial_value` (each drawn from its own seed,
    `seed` and its place, so the same `seed` gives the same weights). Returns their names."""
    if not 0 <= num_layers <= model.config.num_hidden_layers:
        raise ValueError(f"the model has {model.config.num_hidden_layers} layers; cannot re-initialise "
                         f"the top {num_layers}")
    if not num_layers:
        return []
    if model.config.num_layer_groups != model.config.num_hidden_layers:
        raise ValueError(f"the model's {model.config.num_hidden_layers} layers share {model.config.num_layer_groups} "
                         f"set(s) of weights (num_hidden_groups); cannot re-initialise the top {num_layers} alone")
    chosen = set(top_layer_names(model, num_layers))
    done = []
    for index, (name, variable) in enumerate(model.tf1_names()):
        if name in chosen:
            value = initial_value(name, variable.shape, model.config, (seed * 1000 + index) % (2**31 - 1))
            variable.assign(keras.ops.cast(value, variable.dtype))
            done.append(name)
    return done


class LayerwiseTraining(TrainingHook):
    """The hook of both: the optimizer's per-variable learning-rate multipliers for `decay` (1:
    one rate), and the top `reinit_top_layers` layers re-initialised from the run's seed when a
    run starts (never on a resume: the training state holds them)."""

    def __init__(self, decay: float = 1.0, reinit_top_layers: int = 0):
        self.decay, self.reinit_top_layers = decay, reinit_top_layers

    def learning_rate_multipliers(self, run: HookRun) -> list[float] | None:
        return learning_rate_multipliers(run.model, self.decay)

    def on_weights_set(self, run: HookRun) -> list[str]:
        if run.resuming or not self.reinit_top_layers:
            return []
        reinitialize_top_layers(run.model, self.reinit_top_layers, run.options.seed)
        return [f"re-initialised the top {self.reinit_top_layers} of {run.model.config.num_hidden_layers} encoder "
                "layers and the pooler"]
