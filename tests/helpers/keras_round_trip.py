"""Every model of `modeling` through Keras's own files, the loading in another process than the
saving: the encoder in every variant (what a variant changes is the encoder's), the models
around it in the variant with the most to keep (`EVERY_MODEL`: Pre-LN RealFormer-mean).

    python keras_round_trip.py save DIR   # each model: its outputs, `.keras` file and `export()`
    python keras_round_trip.py load DIR   # each back (`import modeling` only): the largest differences, JSON

`save` also trains a classifier with `fit` before saving it (`classifier-fitted`, in that
variant), so its file holds an optimizer state too.
"""

import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

import modeling

VARIANTS = {"post-LN": ("post", "none"), "pre-LN": ("pre", "none"), "RealFormer": ("post", "sum"),
            "RealFormer-mean-pre-LN": ("pre", "mean")}
EVERY_MODEL = "RealFormer-mean-pre-LN"
MODELS = {"encoder": lambda config: modeling.BertModel(config),
          "pretrainer": lambda config: modeling.BertPretrainer(config),
          "pretrainer-mlm": lambda config: modeling.BertPretrainer(config, next_sentence=False),
          "classifier": lambda config: modeling.BertClassifier(config, 3),
          "span_labeler": lambda config: modeling.BertSpanLabeler(config),
          "token_classifier": lambda config: modeling.BertTokenClassifier(config, 4, crf=True),
          "multiple_choice": lambda config: modeling.BertMultipleChoice(config)}


def features(kind):
    """A batch of 2 inputs of 8 tokens for model `kind`."""
    ids = np.random.default_rng(0).integers(1, 50, (2, 8)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    encoder = {"input_ids": ids, "input_mask": mask, "token_type_ids": np.zeros_like(ids)}
    if kind.startswith("pretrainer"):
        return {**encoder, "masked_lm_positions": np.array([[1, 2], [3, 4]], "int32")}
    if kind == "token_classifier":
        return {**encoder, "word_positions": np.array([[1, 2, 3], [0, 4, 5]], "int32")}
    if kind == "multiple_choice":
        return {**{name: np.stack([value, value[::-1]], 1) for name, value in encoder.items()},
                "choice_mask": np.array([[1, 1], [1, 0]], "int32")}
    return encoder


def flat(outputs):
    """{name: numpy array} of a model's outputs, a list in a dict as one entry per item (as the
    export names them)."""
    named = modeling.layers.flat_outputs(outputs)
    if not isinstance(named, dict):
        named = {f"output_{i}": value for i, value in enumerate(tf.nest.flatten(named))}
    return {name: np.asarray(value) for name, value in named.items()}


def save(directory):
    for variant, (layer_norm_type, residual_attention) in VARIANTS.items():
        config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16,
                                     layer_norm_type=layer_norm_type, residual_attention=residual_attention)
        for kind, make in MODELS.items() if variant == EVERY_MODEL else [("encoder", MODELS["encoder"])]:
            keras.utils.set_random_seed(1)
            model = make(config)
            name = f"{kind}-{variant}"
            np.savez(os.path.join(directory, f"{name}.npz"), **flat(model(features(kind), training=False)))
            model.save(os.path.join(directory, f"{name}.keras"))
            model.export(os.path.join(directory, f"{name}.export"), verbose=False)
        if variant != EVERY_MODEL:
            continue
        keras.utils.set_random_seed(2)
        fitted = modeling.BertClassifier(config, 3)
        fitted.compile(optimizer=keras.optimizers.Adam(1e-3),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        batch = features("classifier")
        fitted.fit(batch, np.array([0, 2]), epochs=3, verbose=0)
        name = f"classifier-fitted-{variant}"
        np.savez(os.path.join(directory, f"{name}.npz"), **flat(fitted(batch, training=False)))
        fitted.save(os.path.join(directory, f"{name}.keras"))


def load(directory):
    found = {}
    for file in sorted(os.listdir(directory)):
        if not file.endswith(".keras"):
            continue
        name = file[:-len(".keras")]
        kind = name.split("-")[0]
        batch = features(kind)
        expected = dict(np.load(os.path.join(directory, f"{name}.npz")))
        model = keras.models.load_model(os.path.join(directory, file))
        loaded = flat(model(batch, training=False))
        result = {"class": type(model).__name__, "variant": model.config.variant.name,
                  "keras": max(float(np.abs(loaded[key] - expected[key]).max()) for key in expected),
                  "keys": sorted(loaded) == sorted(expected)}
        if getattr(model, "optimizer", None) is not None and model.optimizer.built:
            result["optimizer_iterations"] = int(model.optimizer.iterations.numpy())
        export = os.path.join(directory, f"{name}.export")
        if os.path.isdir(export):
            served = tf.saved_model.load(export)
            outputs = flat(served.serve(batch))
            result["export"] = max(float(np.abs(outputs[key] - expected[key]).max()) for key in expected)
            result["export_keys"] = sorted(outputs) == sorted(expected)
            signature = served.signatures["serving_default"].structured_input_signature[1]
            result["export_inputs"] = {key: [str(spec.dtype.name), list(spec.shape)] for key, spec in signature.items()}
        found[name] = result
    print(json.dumps(found))


if __name__ == "__main__":
    {"save": save, "load": load}[sys.argv[1]](sys.argv[2])
