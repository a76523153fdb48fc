"""Hugging Face BERT-family weights (safetensors + config.json) <-> the original TF1 names.

Hugging Face keeps PyTorch's [out, in] dense weights, so kernels are transposed; names differ
(`encoder.layer.3.attention.self.query.weight` is `bert/encoder/layer_3/attention/self/query/
kernel`, transposed); `BertForPreTraining` prefixes the encoder with `bert.` and names its heads
`cls.predictions.*` (the decoder weight is the tied word embeddings) and `cls.seq_relationship.*`;
the fine-tuning heads of the original scripts map to Hugging Face's task classes (`BERT.task_heads`),
which `architectures` in config.json names. A family (`hf_family.Family`) holds those names:
BERT's here, RoBERTa's in `roberta`, DistilBERT's in `distilbert`, ALBERT's in `albert`;
config.json's `model_type` says which a directory holds.
Hugging Face's `"gelu"` is the exact erf GELU (our `"gelu_exact"`); its `"gelu_new"` is the
original BERT's tanh GELU (our `"gelu"`). Pure NumPy: no TensorFlow, no PyTorch.
"""

import json
import os
import re
import types

import numpy as np

from bert_realformer import storage
from bert_realformer.checkpoints.albert import ALBERT
from bert_realformer.checkpoints.config_files import config_from_hf
from bert_realformer.checkpoints.distilbert import DISTILBERT
from bert_realformer.checkpoints.formats import (
    VOCABULARY_FILES,
    WeightFormat,
    Weights,
    name_list,
    refuse_unless_forced,
    register,
    vocabulary_files,
)
from bert_realformer.checkpoints.hf_family import POOLER_WEIGHTS, WORD_EMBEDDINGS, Family, bert_config_fields
from bert_realformer.checkpoints.hf_tokenizer import tokenizer_files, vocabulary_beside
from bert_realformer.checkpoints.roberta import ROBERTA
from bert_realformer.checkpoints.tf1 import POOLER_OPTIONAL, WEIGHT_FILES, missing_encoder_weights
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text
from modeling.config import ConfigError
from tokenization.vocabularies import vocabulary_kind


def _bert_config_fields(config):
    return {**bert_config_fields(config), "pad_token_id": 0}


BERT = Family(
    name="BERT", model_type="bert", prefix="bert.", encoder_class="BertModel",
    masked_lm=(
        ("cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel", True),
        ("cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias", False),
        ("cls.predictions.transform.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
        ("cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", False),
        ("cls.predictions.bias", "cls/predictions/output_bias", False),
    ),
    masked_lm_class="BertForMaskedLM",
    next_sentence=(("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", False),
                   ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", False)),
    pretraining_class="BertForPreTraining",
    tied=types.MappingProxyType({"cls.predictions.decoder.weight": WORD_EMBEDDINGS,
                                 "cls.predictions.decoder.bias": "cls/predictions/output_bias"}),
    # The fine-tuning heads of the original scripts. Both sides keep these weights as [outputs, H].
    task_heads=types.MappingProxyType({
        "BertForSequenceClassification": (("classifier.weight", "output_weights", False),
                                          ("classifier.bias", "output_bias", False)),
        "BertForQuestionAnswering": (("qa_outputs.weight", "cls/squad/output_weights", False),
                                     ("qa_outputs.bias", "cls/squad/output_bias", False)),
        "BertForTokenClassification": (("classifier.weight", "cls/ner/output_weights", False),
                                       ("classifier.bias", "cls/ner/output_bias", False)),
        "BertForMultipleChoice": (("classifier.weight", "cls/multiple_choice/output_weights", False),
                                  ("classifier.bias", "cls/multiple_choice/output_bias", False)),
    }),
    config_fields=_bert_config_fields,
    without_pooler=frozenset({"BertForMaskedLM", "BertForQuestionAnswering", "BertForTokenClassification"}),
)
FAMILIES = (BERT, ROBERTA, DISTILBERT, ALBERT)
NO_HF_PLACE = ("cls/ner/transitions",)  # a CRF's transition matrix: Hugging Face has no CRF


def family_of(config):
    """The family whose config.json expresses `config`: ALBERT where it has its embedding size or
    layer groups, DistilBERT where it has no token types, RoBERTa where positions start past a
    padding index, else BERT."""
    if config.embedding_size is not None or config.num_hidden_groups is not None:
        return ALBERT
    if not config.type_vocab_size:
        return DISTILBERT
    return ROBERTA if config.position_offset else BERT


def family_named(model_type, source="config.json"):
    for family in FAMILIES:
        if family.model_type == model_type:
            return family
    raise ConfigError(f"{source}: model_type {model_type!r} is not one of "
                      f"{', '.join(family.model_type for family in FAMILIES)}")


def _name_map(family, num_layers, prefix, architecture=None):
    """[(Hugging Face name, TF1 name, transpose)] for an encoder of `num_layers` sets of layer
    weights (`config.num_layer_groups`), with the heads of `architecture` (one of `family`'s
    classes; None: its pretraining heads) when `prefix` is the family's (a task class)."""
    in_head = prefix and architecture in family.pooler_in_head
    rows = [(prefix + hf, tf1, t) for hf, tf1, t in family.embeddings + (() if in_head else family.pooler)]
    for i in range(num_layers):
        rows += [(f"{prefix}{family.layer_scope.format(i)}.{hf}", f"{family.tf1_layer_scope.format(i)}/{tf1}", t)
                 for hf, tf1, t in family.layer_parts]
    if not prefix:
        return rows
    if architecture in family.task_heads:
        return rows + list(family.task_heads[architecture])
    return [*rows, *family.masked_lm, *family.next_sentence]


def architecture_of(values, family=BERT):
    """The Hugging Face class for TF1 `values`: the fine-tuning head's when there is one, else
    the class with the MLM and NSP heads (BERT's pretraining class), the MLM head alone (MLM-only
    pretraining; RoBERTa's), else the encoder alone."""
    for architecture, heads in family.task_heads.items():
        if heads[0][1] in values:
            return architecture
    if "cls/predictions/output_bias" not in values:
        return family.encoder_class
    if family.pretraining_class and "cls/seq_relationship/output_bias" in values:
        return family.pretraining_class
    return family.masked_lm_class


def _normalise(name):
    """Old checkpoints say LayerNorm.gamma/beta for weight/bias."""
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))


def hf_to_tf1(tensors, num_layers, architecture=None, family=BERT):
    """{Hugging Face name: array} -> ({TF1 name: array}, [Hugging Face names not used]), the
    heads read as `architecture`'s (its config's `architectures`) of `family`."""
    tensors = {_normalise(k): v for k, v in tensors.items()}
    prefix = family.prefix if any(k.startswith(family.prefix) for k in tensors) else ""
    out, used = {}, set()
    for hf, tf1, transpose in _name_map(family, num_layers, prefix, architecture):
        if hf in tensors:
            out[tf1] = np.ascontiguousarray(tensors[hf].T if transpose else tensors[hf])
            used.add(hf)
    ignored = {*family.tied, f"{prefix}embeddings.position_ids", "embeddings.position_ids"}
    unused = sorted(k for k in tensors if k not in used and k not in ignored)
    return out, unused


def tf1_to_hf(values, num_layers, family=BERT):
    """{TF1 name: array} -> ({Hugging Face name: array}, architecture, [TF1 names left out]):
    the names of `architecture_of(values, family)`. Left out: what that class has no place for
    (the MLM/NSP heads beside a fine-tuning head, RoBERTa's NSP head, a CRF's transitions,
    Pre-LN's extra LayerNorms). The pooler is kept for every class, also where transformers
    builds none (it ignores it), so that a round trip is exact."""
    architecture = architecture_of(values, family)
    prefix = "" if architecture == family.encoder_class else family.prefix
    rows = _name_map(family, num_layers, prefix, architecture)
    out, used = {}, set()
    for hf, tf1, transpose in rows:
        if tf1 in values:
            out[hf] = np.ascontiguousarray(values[tf1].T if transpose else values[tf1])
            used.add(tf1)
    if architecture in (family.pretraining_class, family.masked_lm_class):
        hf_name = {tf1: hf for hf, tf1, _ in rows}
        for hf, tf1 in family.tied.items():
            out[hf] = out[hf_name[tf1]]
    left_out = sorted(name for name in values if name not in used)
    return out, architecture, left_out


def config_to_hf(config, architecture, force=False, labels=None, num_labels=None, multi_label=False):
    """BertConfig -> Hugging Face config.json object of its family (`family_of`). Pre-LN and
    RealFormer cannot be expressed by Hugging Face's models: an error unless `force` (then the
    variant is dropped). A classifier's `num_labels` outputs get `id2label`/`label2id` from
    `labels` (the run's label_list.txt; LABEL_i without one) and `problem_type` (one output:
    regression; with `multi_label`, a sigmoid per label: multi_label_classification)."""
    family = family_of(config)
    if not config.variant.is_original and not force:
        raise ConfigError(f"a {config.layer_norm_type}-LN model with residual_attention="
                          f"{config.residual_attention!r} cannot be expressed by Hugging Face's "
                          f"{family.encoder_class} (it would silently become plain {family.name}); pass force to "
                          "export anyway", options=("force",))
    return {"architectures": [architecture], "model_type": family.model_type, **family.config_fields(config),
            **_label_fields(architecture, labels, num_labels, multi_label)}


def _label_fields(architecture, labels, num_labels, multi_label=False):
    classifier = architecture.endswith("ForSequenceClassification")
    if not (classifier or architecture.endswith("ForTokenClassification")) or not num_labels:
        return {}
    if labels is None or len(labels) != num_labels:
        labels = [f"LABEL_{i}" for i in range(num_labels)]
    fields = {"id2label": {str(i): label for i, label in enumerate(labels)},
              "label2id": {label: i for i, label in enumerate(labels)}}
    if classifier:
        fields["problem_type"] = ("regression" if num_labels == 1 else "multi_label_classification" if multi_label
                                  else "single_label_classification")
    return fields


def labels_from_hf(hf_config):
    """The labels of a Hugging Face classifier config in output order, or None (none, or the
    LABEL_i placeholders)."""
    id2label = hf_config.get("id2label")
    if not id2label or hf_config.get("problem_type") == "regression":
        return None
    labels = [id2label[key] for key in sorted(id2label, key=int)]
    return None if labels == [f"LABEL_{i}" for i in range(len(labels))] else labels


def _stored_tensors(weights_path: str) -> dict[str, np.ndarray]:
    """{name: array} of a model.safetensors; a file that is not one (truncated, another format)
    is an `InputError` naming it."""
    from safetensors import SafetensorError
    from safetensors.numpy import load
    try:
        return load(storage.read_bytes(weights_path))
    except SafetensorError as error:
        raise InputError(f"{weights_path}: not a readable safetensors file ({error}); truncated? Copy it again "
                         "from where it came from") from None


def read_hf_dir(path):
    """(BertConfig, {TF1 name: array}, vocab path or None, unused Hugging Face names, a
    classifier's labels in order or None, the class's architecture, its family)."""
    config_path = os.path.join(path, "config.json")
    weights_path = os.path.join(path, "model.safetensors")
    for required in (config_path, weights_path):
        if not storage.isfile(required):
            raise ConfigError(f"{required}: missing (a Hugging Face model directory holds config.json "
                              "and model.safetensors)")
    try:
        hf_config = json.loads(read_text(config_path))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{config_path}: invalid JSON at line {error.lineno} column {error.colno}: "
                          f"{error.msg}") from None
    config = config_from_hf(hf_config, source=config_path)
    family = family_named(hf_config.get("model_type", "bert"), config_path)
    architecture = (hf_config.get("architectures") or [family.pretraining_class or family.masked_lm_class])[0]
    values, unused = hf_to_tf1(_stored_tensors(weights_path), config.num_layer_groups, architecture, family)
    vocab = next((os.path.join(path, name) for name in VOCABULARY_FILES if storage.isfile(os.path.join(path, name))),
                 None)
    return config, values, vocab, unused, labels_from_hf(hf_config), architecture, family


def write_hf_dir(path, config, values, vocab_file=None, force=False, labels=None, do_lower_case=True,
                 multi_label=False):
    """Writes config.json, model.safetensors (and vocab.txt with the tokenizer's files) into
    `path`. Returns (the architecture, [TF1 names left out]). Weights with no Hugging Face place
    are an error unless `force`."""
    from safetensors.numpy import save
    family = family_of(config)
    tensors, architecture, left_out = tf1_to_hf(values, config.num_layer_groups, family)
    heads = family.task_heads.get(architecture)
    num_labels = values[heads[0][1]].shape[0] if heads else None
    hf_config = config_to_hf(config, architecture, force, labels, num_labels, multi_label)
    # (a class with no pooler in a family that never has one: nothing of its function is lost)
    unused_pooler = POOLER_WEIGHTS if not family.pooler and architecture in family.without_pooler else ()
    dropped = [name for name in left_out if name not in unused_pooler]
    if dropped and not force:
        crf = [name for name in dropped if name in NO_HF_PLACE]
        why = " (Hugging Face's token classification has no CRF)" if crf else ""
        raise ConfigError(f"{len(dropped)} weights have no place in Hugging Face's {architecture}{why} and would "
                          f"be dropped: {name_list(dropped)}; pass force to write without them", options=("force",))
    # Tied tensors must not share memory in a safetensors file; transformers 4.x needs the
    # "format" metadata to load it.
    weights = save({k: np.array(v, copy=True) for k, v in tensors.items()}, metadata={"format": "pt"})
    storage.write_atomic(os.path.join(path, "model.safetensors"), weights)
    storage.write_atomic(os.path.join(path, "config.json"), json.dumps(hf_config, indent=2))
    if vocab_file and vocabulary_kind(vocab_file) == "wordpiece":
        storage.write_atomic(os.path.join(path, "vocab.txt"), storage.read_bytes(vocab_file))
        for name, text in tokenizer_files(vocab_file, do_lower_case, config.max_sequence_length,
                                          token_types=bool(config.type_vocab_size)).items():
            storage.write_atomic(os.path.join(path, name), text)
    elif vocab_file:  # ALBERT's spiece.model, RoBERTa's vocab.json and merges.txt: as they are
        for name, source in vocabulary_files(vocab_file).items():
            storage.write_atomic(os.path.join(path, name), storage.read_bytes(source))
    return architecture, left_out


@register
class HuggingFaceFormat(WeightFormat):
    """A Hugging Face model directory: config.json (a task class's architecture where there is a
    fine-tuning head), model.safetensors, vocab.txt and the tokenizer's files."""
    name = "hf"
    marker_files = ("config.json", "model.safetensors")
    title = "Hugging Face model"

    def read(self, path, options):
        config, values, vocab, unused, labels, architecture, family = read_hf_dir(path)
        made = None
        if options.vocab_file is None and vocab is None and options.scratch_dir is not None and family.wordpiece:
            made = vocabulary_beside(path, options.scratch_dir)
        weights = Weights(config, values, options.vocab_file or vocab or made, labels)
        if made:
            weights.notes.append(f"vocab.txt: the WordPiece vocabulary of {path}/tokenizer.json (no vocab.txt "
                                 "beside it)")
        if unused and options.target not in WEIGHT_FILES:  # (a model built from them: as transformers drops them)
            weights.notes.append(f"not read (no BERT equivalent): {name_list(unused)}")
        elif unused:
            refuse_unless_forced(weights, options.force, f"{len(unused)} weights of input have no BERT equivalent "
                                 f"and would be dropped: {name_list(unused)}", "not converted (no BERT equivalent)",
                                 unused, options=("input",))
        missing = missing_encoder_weights(values, config)
        if (architecture in family.without_pooler and options.target in POOLER_OPTIONAL
                and any(name in missing for name in POOLER_WEIGHTS)):
            missing = [name for name in missing if name not in POOLER_WEIGHTS]
            weights.notes.append(f"bert/pooler/dense: not in {path} ({architecture} has no pooler); a classifier "
                                 "fine-tuned from these weights starts its pooler fresh")
        if missing and options.target not in WEIGHT_FILES:  # the model would keep random weights in their place
            raise InputError(f"{path}: {len(missing)} weights of this config are missing: {name_list(missing)}")
        if missing:
            refuse_unless_forced(weights, options.force, f"input: {len(missing)} weights of this config are missing: "
                                 f"{name_list(missing)}", "missing from the input and so from the output", missing,
                                 options=("input",))
        return weights

    def write(self, directory, weights, options):
        architecture, left_out = write_hf_dir(directory, weights.config, weights.values, weights.vocab_file,
                                              options.force, weights.labels, options.do_lower_case,
                                              weights.multi_label)
        if left_out:
            weights.notes.append(f"not converted (no place in {architecture}): {', '.join(left_out)}")
        written = [f"config.json ({architecture})", "model.safetensors"]
        return written + (["vocab.txt and the tokenizer's files"] if weights.vocab_file else [])

    def names(self, config):
        return {tf1: hf for hf, tf1, _ in _name_map(family_of(config), config.num_layer_groups, "")}
