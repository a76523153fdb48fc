"""Converts BERT checkpoints between TF1 (Google, HFL, RealFormer, the original code's
model.ckpt-N), our training state, Hugging Face (safetensors) and KerasHub presets, or exports
a SavedModel.

    python convert_checkpoint.py --from=hf --to=tf1 --input=hf_model_dir --output=out_dir
    python convert_checkpoint.py --from=tf1 --to=hf --input=uncased_L-12_H-768_A-12 --output=hf_dir
    python convert_checkpoint.py --from=ours --to=savedmodel --input=run_dir --output=serving \\
        --bert_config_file=bert_config.json --vocab_file=vocab.txt

--input for tf1 is a checkpoint prefix or a directory (with bert_config.json and vocab.txt, as
released); for hf a directory with config.json, model.safetensors (and vocab.txt); for ours a
run directory or its training_state. --to=tf1 writes DIR/bert_model.ckpt.*, DIR/bert_config.json,
DIR/vocab.txt; --to=hf writes config.json, model.safetensors, vocab.txt and the tokenizer's
files, as the Hugging Face class of the checkpoint's head (pretraining, sequence
classification with the run's labels, question answering, token classification, multiple
choice); --to=kerashub writes a KerasHub preset directory (a BertTextClassifier or BertMaskedLM
task where the checkpoint has that head; --from=kerashub reads one); --to=ours writes
DIR/training_state; --to=savedmodel writes DIR/<version> taking raw text. A classifier's
label_list.txt travels with it.
"""

import os
import sys

from absl import flags

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.runner import script_entry

FLAGS = flags.FLAGS
SOURCES = ("tf1", "ours", "hf", "kerashub")
TARGETS = ("tf1", "ours", "hf", "kerashub", "savedmodel")
flags.DEFINE_string("from", None, "Format of --input: tf1, ours, hf or kerashub.")
flags.DEFINE_string("to", None, "Format to write to --output: tf1, ours, hf, kerashub or savedmodel.")
flags.DEFINE_string("input", None, "Checkpoint prefix or directory to read.")
flags.DEFINE_string("output", None, "Directory to write.")
flags.DEFINE_string("bert_config_file", None, "Config of the input (default: the one beside it).")
flags.DEFINE_string("vocab_file", None, "Vocabulary of the input (default: vocab.txt beside it).")
flags.DEFINE_bool("do_lower_case", True, "--to=savedmodel, --to=hf (tokenizer_config.json) and --to=kerashub (its "
                  "tokenizer): lower-case the input text (False for cased vocabularies).")
flags.DEFINE_integer("max_seq_length", 128, "--to=savedmodel and --to=kerashub (its preprocessor): sequence length.")
flags.DEFINE_bool("force", False, "Write even when the target cannot express the model (e.g. a RealFormer "
                  "or Pre-LN model as Hugging Face's BertModel, which would compute plain BERT) or weights "
                  "would be left out (fine-tuning heads in --to=hf, unknown Hugging Face weights, a Hugging Face "
                  "model without its pooler); every weight left out is listed.")


def _beside(path, name):
    directory = path if storage.isdir(path) else os.path.dirname(path)
    candidate = os.path.join(directory, name)
    return candidate if storage.isfile(candidate) else None


def read_source():
    """(BertConfig, {TF1 name: array}, vocab file or None, a classifier's labels or None)."""
    import modeling
    from bert_realformer import checkpoints
    names = checkpoints.huggingface.name_list
    kind, path = FLAGS["from"].value, FLAGS.input
    if not storage.exists(path) and not storage.exists(path + ".index"):
        raise InputError(f"--input={path}: no such file or directory")
    if kind == "kerashub":
        from bert_realformer.checkpoints import kerashub
        config, values, vocab = kerashub.read_preset(path)
        return config, values, FLAGS.vocab_file or vocab, None
    if kind == "hf":
        config, values, vocab, unused, labels = checkpoints.huggingface.read_hf_dir(path)
        if unused:
            _refuse_unless_forced(f"{len(unused)} weights of --input have no BERT equivalent and would be dropped: "
                                  f"{names(unused)}", "not converted (no BERT equivalent)", unused)
        missing = _check_against_config(values, config)
        if missing:
            message = f"--input: {len(missing)} weights of this config are missing: {names(missing)}"
            if FLAGS.to not in ("tf1", "hf"):  # the model would keep random weights in their place
                raise InputError(message)
            _refuse_unless_forced(message, "missing from the input and so from the output", missing)
        return config, values, FLAGS.vocab_file or vocab, labels
    config_file = FLAGS.bert_config_file or _beside(path, "bert_config.json")
    if config_file is None:
        raise InputError(f"--bert_config_file is needed: no bert_config.json beside {path}")
    config = modeling.BertConfig.from_json_file(config_file)
    if kind == "tf1":
        values = checkpoints.read_tf1_checkpoint(path)
    else:
        from bert_realformer.checkpoints.training_states import read_training_state
        values = read_training_state(path)
    missing = _check_against_config(values, config)
    if missing:
        raise InputError(f"--input: {len(missing)} weights of this config are missing: {names(missing)}")
    labels_file = _beside(path, "label_list.txt")  # a classifier run's label order
    labels = None
    if labels_file:
        from bert_realformer.text_files import read_lines
        labels = [line.rstrip("\r\n") for _, line in read_lines(labels_file) if line.strip()]
    return config, values, FLAGS.vocab_file or _beside(path, "vocab.txt"), labels


def _refuse_unless_forced(message, forced_note, names):
    if not FLAGS.force:
        raise InputError(f"{message}; pass --force to convert without them")
    print(f"{forced_note}: {', '.join(names)}", file=sys.stderr)


def _check_against_config(values, config):
    """The encoder weights the config implies that `values` lacks (heads are optional); a
    shape that differs from the config's is an error."""
    import modeling
    expected = modeling.tf1_variable_map(modeling.BertModel(config))
    for name, variable in expected.items():
        if name in values and tuple(values[name].shape) != tuple(variable.shape):
            raise InputError(f"--input: {name} has shape {list(values[name].shape)} but the config "
                             f"implies {list(variable.shape)}")
    return [name for name in expected if name not in values]


def _model_for(config, values):
    """The model class whose weights `values` hold, with the values loaded."""
    import modeling
    if "output_weights" in values:  # a fine-tuned classifier (its MLM/NSP heads, if kept, are not served)
        model = modeling.BertClassifier(config, num_labels=values["output_weights"].shape[0])
    elif "cls/predictions/output_bias" in values:
        model = modeling.BertPretrainer(config, next_sentence="cls/seq_relationship/output_bias" in values)
    else:
        model = modeling.BertModel(config)
    variables = modeling.tf1_variable_map(model)
    for name, variable in variables.items():
        if name in values:
            variable.assign(values[name])
    return model


# Moved in last (and removed first): the configs (ours and TF1's; Hugging Face's and KerasHub's)
# and the file whose presence makes a SavedModel.
LAST_FILES = ("bert_config.json", "config.json", "saved_model.pb")


def staging_dir():
    """Where the output is written before it is switched into --output (beside it)."""
    return f"{FLAGS.output.rstrip('/')}.tmp-{os.getpid()}"


def write_target(config, values, vocab, labels=None):
    import modeling
    from bert_realformer import checkpoints
    kind, out = FLAGS.to, staging_dir()
    written = []
    if kind == "tf1":
        checkpoints.write_tf1_checkpoint(values, os.path.join(out, "bert_model.ckpt"))
        config.to_json_file(os.path.join(out, "bert_config.json"))
        written = ["bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json"]
    elif kind == "hf":
        architecture, left_out = checkpoints.huggingface.write_hf_dir(out, config, values, vocab, FLAGS.force,
                                                                   labels, FLAGS.do_lower_case)
        if left_out:
            print(f"not converted (no place in {architecture}): {', '.join(left_out)}", file=sys.stderr)
        written = [f"config.json ({architecture})", "model.safetensors"]
        if vocab:
            written.append("vocab.txt and the tokenizer's files")
    elif kind == "kerashub":
        from bert_realformer.checkpoints import kerashub
        if vocab is None:
            raise InputError("--to=kerashub needs --vocab_file (no vocab.txt beside --input)")
        preset, left_out = kerashub.write_preset(out, config, values, vocab, FLAGS.do_lower_case,
                                                 FLAGS.max_seq_length, FLAGS.force)
        if left_out:
            print(f"not converted (no place in {preset}): {', '.join(left_out)}", file=sys.stderr)
        written = [f"a KerasHub {preset} preset"]
    elif kind == "ours":
        from bert_realformer.checkpoints.training_states import write_training_state
        written = [os.path.relpath(write_training_state(values, out), out)]
        config.to_json_file(os.path.join(out, "bert_config.json"))
        written.append("bert_config.json")
    else:
        if vocab is None:
            raise InputError("--to=savedmodel needs --vocab_file (no vocab.txt beside --input)")
        from bert_realformer.tasks.export import export_classifier, export_encoder
        model = _model_for(config, values)
        if isinstance(model, modeling.BertClassifier):
            # One output is a regression score (STS-B), as run_classifier trains it: not a softmax.
            labels = [str(i) for i in range(model.num_labels)] if model.num_labels > 1 else None
            path = export_classifier(model, vocab, FLAGS.do_lower_case, FLAGS.max_seq_length, labels, out)
        else:
            encoder = model if isinstance(model, modeling.BertModel) else model.bert
            path = export_encoder(encoder, vocab, FLAGS.do_lower_case, FLAGS.max_seq_length, out)
        written = [os.path.relpath(path, out)]
    if vocab and kind in ("tf1", "ours"):
        storage.write_atomic(os.path.join(out, "vocab.txt"), storage.read_bytes(vocab))
        written.append("vocab.txt")
    if labels and kind in ("tf1", "ours"):
        storage.write_atomic(os.path.join(out, "label_list.txt"), "".join(f"{label}\n" for label in labels))
        written.append("label_list.txt")
    return written


def main(argv):
    del argv
    for name in ("from", "to", "input", "output"):
        if FLAGS[name].value is None:
            raise InputError(f"--{name} is required")
    for name, known in (("from", SOURCES), ("to", TARGETS)):
        if FLAGS[name].value not in known:
            raise InputError(f"--{name}={FLAGS[name].value}: unknown format; expected one of {', '.join(known)}")
    config, values, vocab, labels = read_source()
    print(f"read {len(values)} weights from {FLAGS.input}; writing --to={FLAGS.to} beside {FLAGS.output} "
          "(switched in when whole)", file=sys.stderr, flush=True)
    try:
        written = write_target(config, values, vocab, labels)
        # Whole or not at all: a crash between two files must not leave new weights beside an
        # old config of the same sizes (a variant key would differ silently).
        storage.switch_in(staging_dir(), FLAGS.output, last=LAST_FILES)
    finally:
        storage.rmtree(staging_dir())
    variant = f"{config.layer_norm_type}-LN, residual_attention={config.residual_attention}"
    print(f"{FLAGS['from'].value} -> {FLAGS.to}: {len(values)} weights ({config.num_hidden_layers} layers, "
          f"hidden {config.hidden_size}, {variant}); wrote {', '.join(written)} in {FLAGS.output}")


entry = script_entry(main, __doc__)  # the installed command `bert-convert-checkpoint`

if __name__ == "__main__":
    entry()
