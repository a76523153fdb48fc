"""KerasHub BERT presets <-> the original TF1 names.

A preset directory is what `keras_hub.models.BertBackbone.from_preset(DIR)` loads: KerasHub's
`config.json`, `model.weights.h5`, the tokenizer with the vocabulary, and for a checkpoint with
a classifier or MLM head a `BertTextClassifier` / `BertMaskedLM` task (`task.json`,
`task.weights.h5`). The presets are written and read by KerasHub itself; this module maps the
weights: KerasHub keeps attention kernels per head ([H, heads, H/heads]) and Dense kernels as
[in, out], the original [H, H] and, for the classifier, `output_weights` [C, H].

KerasHub's BERT is post-LN BERT with the original's tanh GELU: Pre-LN, RealFormer and other
activations cannot be expressed (`ConfigError`). Its `BertMaskedLM` head is its own (exact GELU
and LayerNorm epsilon 1e-5 in the transform), so its MLM logits differ slightly from the
original BERT's, whose weights it holds; the encoder's outputs are the same.

KerasHub's `BertTokenizer` lower-cases by NFKC case folding, where the original lower-cases
only: full-width punctuation, digits and letters become ASCII (，-> ,), so a lower-cased
Chinese model's preset reads Chinese text with other ids than the original's. The conversion
says so (`unreachable_tokens`).
"""

import os
import tempfile
import unicodedata

import numpy as np

from bert_realformer import storage
from bert_realformer.checkpoints.config_files import config_from_kerashub, read_config, write_config
from bert_realformer.checkpoints.files_beside import KERASHUB_VOCABULARY_FILE
from bert_realformer.checkpoints.formats import WeightFormat, Weights, name_list, register
from bert_realformer.errors import InputError
from modeling.config import BertConfig, ConfigError
from tokenization.reference import vocab_lines

TASK_FILE = "task.json"
WEIGHTS_FILE = "model.weights.h5"  # the backbone's weights
OUR_CONFIG = "bert_config.json"


def check_expressible(config: BertConfig) -> None:
    if not config.variant.is_original:
        raise ConfigError(f"a {config.layer_norm_type}-LN model with residual_attention={config.residual_attention!r} "
                          "cannot be expressed by KerasHub's BertBackbone (post-LN BERT only)")
    if config.hidden_act.lower() != "gelu":
        raise ConfigError(f"hidden_act {config.hidden_act!r} cannot be expressed by KerasHub's BertBackbone "
                          "(the original tanh GELU only)")
    if (config.position_offset, config.layer_norm_eps, config.pooler_activation) != (0, 1e-12, "tanh") \
            or not config.type_vocab_size:
        raise ConfigError(f"position_offset {config.position_offset}, layer_norm_eps {config.layer_norm_eps}, "
                          f"pooler_activation {config.pooler_activation!r} and type_vocab_size "
                          f"{config.type_vocab_size} cannot be expressed by KerasHub's BertBackbone (BERT's 0, "
                          "1e-12, 'tanh' and token types only)")
    if config.embedding_size is not None or config.num_hidden_groups is not None:
        raise ConfigError(f"embedding_size {config.embedding_size} and num_hidden_groups {config.num_hidden_groups} "
                          "(ALBERT's) cannot be expressed by KerasHub's BertBackbone (one set of weights per layer, "
                          "embeddings as wide as the layers)")


def _pairs(backbone):
    """[(KerasHub variable, TF1 name)] of a `BertBackbone`."""
    pairs = [(backbone.token_embedding.embeddings, "bert/embeddings/word_embeddings"),
             (backbone.position_embedding.position_embeddings, "bert/embeddings/position_embeddings"),
             (backbone.segment_embedding.embeddings, "bert/embeddings/token_type_embeddings"),
             (backbone.embeddings_layer_norm.gamma, "bert/embeddings/LayerNorm/gamma"),
             (backbone.embeddings_layer_norm.beta, "bert/embeddings/LayerNorm/beta")]
    for i, block in enumerate(backbone.transformer_layers):
        prefix = f"bert/encoder/layer_{i}"
        attention = block._self_attention_layer
        for part, dense in (("query", attention._query_dense), ("key", attention._key_dense),
                            ("value", attention._value_dense)):
            pairs += [(dense.kernel, f"{prefix}/attention/self/{part}/kernel"),
                      (dense.bias, f"{prefix}/attention/self/{part}/bias")]
        pairs += [(attention._output_dense.kernel, f"{prefix}/attention/output/dense/kernel"),
                  (attention._output_dense.bias, f"{prefix}/attention/output/dense/bias"),
                  (block._self_attention_layer_norm.gamma, f"{prefix}/attention/output/LayerNorm/gamma"),
                  (block._self_attention_layer_norm.beta, f"{prefix}/attention/output/LayerNorm/beta"),
                  (block._feedforward_intermediate_dense.kernel, f"{prefix}/intermediate/dense/kernel"),
                  (block._feedforward_intermediate_dense.bias, f"{prefix}/intermediate/dense/bias"),
                  (block._feedforward_output_dense.kernel, f"{prefix}/output/dense/kernel"),
                  (block._feedforward_output_dense.bias, f"{prefix}/output/dense/bias"),
                  (block._feedforward_layer_norm.gamma, f"{prefix}/output/LayerNorm/gamma"),
                  (block._feedforward_layer_norm.beta, f"{prefix}/output/LayerNorm/beta")]
    return pairs + [(backbone.pooled_dense.kernel, "bert/pooler/dense/kernel"),
                    (backbone.pooled_dense.bias, "bert/pooler/dense/bias")]


def _mlm_pairs(head):
    return [(head._intermediate_dense.kernel, "cls/predictions/transform/dense/kernel"),
            (head._intermediate_dense.bias, "cls/predictions/transform/dense/bias"),
            (head._intermediate_layer_norm.gamma, "cls/predictions/transform/LayerNorm/gamma"),
            (head._intermediate_layer_norm.beta, "cls/predictions/transform/LayerNorm/beta"),
            (head._bias, "cls/predictions/output_bias")]


def _assign(pairs, values):
    """Ours -> KerasHub: each value reshaped to its variable (per-head attention kernels)."""
    for variable, name in pairs:
        variable.assign(np.reshape(values[name], tuple(variable.shape)))


def _read(pairs, config):
    """KerasHub -> ours: per-head kernels and biases back to the original's 2-D and 1-D."""
    out = {}
    for variable, name in pairs:
        value = np.asarray(variable.numpy())
        if value.ndim == 3:  # [H, heads, H/heads] (query, key, value) or [heads, H/heads, H] (output)
            value = value.reshape(config.hidden_size, config.hidden_size)
        elif name.endswith("/bias") and value.ndim == 2:  # [heads, H/heads]
            value = value.reshape(-1)
        out[name] = np.ascontiguousarray(value)
    return out


def _backbone(keras_hub, config):
    return keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size)


def write_preset(path: str, config: BertConfig, values: dict, vocab_file: str, do_lower_case: bool = True,
                 sequence_length: int = 128, force: bool = False) -> tuple[str, list[str]]:
    """Writes a KerasHub preset of `values` to `path`: a `BertTextClassifier` where there is a
    classifier head (`output_weights`), a `BertMaskedLM` where there are MLM heads, else the
    backbone and its tokenizer; our `bert_config.json` beside (KerasHub ignores it; it keeps
    what KerasHub's config does not hold). Returns (the preset's class, [TF1 names left out]):
    weights with no KerasHub place (NSP, the other fine-tuning heads) are an error unless `force`."""
    import keras_hub
    check_expressible(config)
    backbone = _backbone(keras_hub, config)
    pairs = _pairs(backbone)
    _assign(pairs, values)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=do_lower_case)
    if "output_weights" in values:
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=sequence_length)
        task = keras_hub.models.BertTextClassifier(backbone, num_classes=values["output_weights"].shape[0],
                                                    preprocessor=preprocessor)
        task.output_dense.kernel.assign(values["output_weights"].T)
        task.output_dense.bias.assign(values["output_bias"])
    elif "cls/predictions/output_bias" in values:
        preprocessor = keras_hub.models.BertMaskedLMPreprocessor(tokenizer, sequence_length=sequence_length)
        task = keras_hub.models.BertMaskedLM(backbone, preprocessor=preprocessor)
        pairs += _mlm_pairs(task.masked_lm_head)
        _assign(_mlm_pairs(task.masked_lm_head), values)
    else:
        task = None
    used = {name for _, name in pairs} | ({"output_weights", "output_bias"} if "output_weights" in values else set())
    left_out = sorted(name for name in values if name not in used)
    class_name = type(task).__name__ if task is not None else "BertBackbone"
    if left_out and not force:
        raise ConfigError(f"{len(left_out)} weights have no place in KerasHub's {class_name} and would be dropped: "
                          f"{name_list(left_out)}; pass force to write without them", options=("force",))
    with tempfile.TemporaryDirectory() as local:
        staged = os.path.join(local, "preset")
        if task is not None:
            task.save_to_preset(staged)
        else:
            backbone.save_to_preset(staged)
            tokenizer.save_to_preset(staged)
        write_config(config, os.path.join(staged, OUR_CONFIG))
        storage.makedirs(path)
        storage.move_tree(staged, path, last=("config.json",))
    return class_name, left_out


def _loaded(path: str, task_class: str):
    """(the task KerasHub builds from the preset, or None where it holds none; the backbone); weights
    files that h5py cannot read (truncated) are an `InputError` naming them."""
    import keras_hub
    try:
        if "BertTextClassifier" in task_class:
            task = keras_hub.models.BertTextClassifier.from_preset(path)
        elif "BertMaskedLM" in task_class:
            task = keras_hub.models.BertMaskedLM.from_preset(path)
        else:
            task = None
        return task, (task.backbone if task is not None else keras_hub.models.BertBackbone.from_preset(path))
    except OSError as error:  # (h5py's, for a file it cannot open as HDF5)
        raise InputError(f"{path}: its weights ({WEIGHTS_FILE}, or the task's) cannot be read ({error}); "
                         "truncated? Copy the preset again") from None


def read_preset(path: str) -> tuple[BertConfig, dict, str | None]:
    """(BertConfig, {TF1 name: array}, the vocabulary file or None) of a KerasHub BERT preset
    directory, with its classifier or MLM head when it holds a task."""
    import keras_hub
    for required in ("config.json", WEIGHTS_FILE):
        if not storage.isfile(os.path.join(path, required)):
            raise ConfigError(f"{os.path.join(path, required)}: missing (a KerasHub preset directory holds "
                              f"config.json and {WEIGHTS_FILE})")
    task_class = ""
    if storage.isfile(os.path.join(path, TASK_FILE)):
        task_class = storage.read_bytes(os.path.join(path, TASK_FILE)).decode("utf-8")
    task, backbone = _loaded(path, task_class)
    config = config_from_kerashub(backbone.get_config(), path)
    values = _read(_pairs(backbone), config)
    if isinstance(task, keras_hub.models.BertTextClassifier):
        values["output_weights"] = np.ascontiguousarray(np.asarray(task.output_dense.kernel.numpy()).T)
        values["output_bias"] = np.asarray(task.output_dense.bias.numpy())
    elif task is not None:
        values.update(_read(_mlm_pairs(task.masked_lm_head), config))
    ours = os.path.join(path, OUR_CONFIG)
    if storage.isfile(ours):  # written by us: the keys KerasHub's config does not hold
        recorded = read_config(ours)
        if all(getattr(recorded, key) == getattr(config, key) for key in
               ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")):
            config = recorded
    vocab = os.path.join(path, KERASHUB_VOCABULARY_FILE)
    return config, values, (vocab if storage.isfile(vocab) else None)


def unreachable_tokens(vocab_file: str) -> list[str]:
    """The tokens of `vocab_file` (without their `##`) that KerasHub's lower-casing tokenizer
    never gives, because NFKC case folding changes them where the original's lower-casing does
    not (`，`, `！`, `１`, `ß`); full-width ones first."""
    words = (token.removeprefix("##") for token in vocab_lines(vocab_file) if token and not token.startswith("["))
    folded = dict.fromkeys(word for word in words if unicodedata.normalize("NFKC", word).casefold() != word.lower())
    return sorted(folded, key=lambda word: not all(0xFF00 <= ord(char) <= 0xFFEF for char in word))  # (stable)


@register
class KerasHubFormat(WeightFormat):
    """A KerasHub preset directory (`keras_hub.models.BertBackbone.from_preset`), with a
    `BertTextClassifier` or `BertMaskedLM` task where the weights have that head."""
    name = "kerashub"
    marker_files = ("config.json", "metadata.json")
    title = "KerasHub preset"

    def read(self, path, options):
        config, values, vocab = read_preset(path)
        return Weights(config, values, options.vocab_file or vocab)

    def write(self, directory, weights, options):
        if weights.vocab_file is None:
            raise InputError("to=kerashub needs vocab_file (no vocab.txt beside input)",
                             options=("to", "vocab_file", "input"))
        preset, left_out = write_preset(directory, weights.config, weights.values, weights.vocab_file,
                                        options.do_lower_case, options.max_seq_length, options.force)
        if left_out:
            weights.notes.append(f"not converted (no place in {preset}): {', '.join(left_out)}")
        unreachable = unreachable_tokens(weights.vocab_file) if options.do_lower_case else []
        if unreachable:
            weights.notes.append(
                f"note: KerasHub's tokenizer lower-cases by NFKC case folding: {len(unreachable)} tokens of the "
                f"vocabulary never come out of it ({' '.join(unreachable[:8])} ...), so text holding such "
                "characters gets other ids than the original tokenizer's; tokenize with this project's "
                "tokenizer, or serve the model as --to=savedmodel")
        return [f"a KerasHub {preset} preset"]

    def names(self, config):
        import keras_hub
        return {tf1: variable.path for variable, tf1 in _pairs(_backbone(keras_hub, config))}
