"""Converts BERT checkpoints between TF1 (Google, HFL, RealFormer, the original code's
model.ckpt-N), our training state, Hugging Face (safetensors) and KerasHub presets, or exports
a SavedModel.

    python convert_checkpoint.py --to=tf1 --input=hf_model_dir --output=out_dir   # --from: what it holds
    python convert_checkpoint.py --from=tf1 --to=hf --input=uncased_L-12_H-768_A-12 --output=hf_dir
    python convert_checkpoint.py --from=ours --to=savedmodel --input=run_dir --output=serving \\
        --bert_config_file=bert_config.json --vocab_file=vocab.txt

--input for tf1 is a checkpoint prefix or a directory (with bert_config.json and vocab.txt, as
released); for hf a directory with config.json, model.safetensors (and vocab.txt, or a
tokenizer.json whose WordPiece vocabulary becomes vocab.txt: transformers 5 saves that alone); for ours a
run directory or its training_state. --to=tf1 writes DIR/bert_model.ckpt.*, DIR/bert_config.json,
DIR/vocab.txt; --to=hf writes config.json, model.safetensors, vocab.txt and the tokenizer's
files, as the Hugging Face class of the checkpoint's head (pretraining, sequence
classification with the run's labels, question answering, token classification, multiple
choice); --to=kerashub writes a KerasHub preset directory (a BertTextClassifier or BertMaskedLM
task where the checkpoint has that head; --from=kerashub reads one); --to=ours writes
DIR/training_state; --to=savedmodel writes DIR/<version> taking raw text (with --quantize=int8, its Transformer blocks
in 8 bits). A classifier's
label_list.txt travels with it; a classifier fine-tuned by run_classifier.py serves texts as that
run read them (its --max_seq_length, --doc_stride windows and --window_pooling, or --truncation:
OUTPUT_DIR/training_options.json).
"""

import fnmatch
import os
import sys
import tempfile

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.runner import require_flags, script_entry
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS
flags.DEFINE_string("from", "auto", "Format of --input: auto (found from what it holds, as the other scripts read "
                    "--init_checkpoint), tf1, ours, hf or kerashub.")
flags.DEFINE_string("to", None, "Format to write to --output: tf1, ours, hf, kerashub or savedmodel.")
flags.DEFINE_string("input", None, "Checkpoint prefix or directory to read.")
flags.DEFINE_string("output", None, "Directory to write.")
flags.DEFINE_string("bert_config_file", None, "Config of the input (default: the one beside it).")
flags.DEFINE_string("vocab_file", None, "Vocabulary of the input (default: vocab.txt beside it; --from=hf "
                    "without one: the WordPiece vocabulary of the tokenizer.json beside it).")
flags.DEFINE_bool("do_lower_case", True, "--to=savedmodel, --to=hf (tokenizer_config.json) and --to=kerashub (its "
                  "tokenizer): lower-case the input text (False for cased vocabularies).")
flags.DEFINE_integer("max_seq_length", 128, "--to=savedmodel and --to=kerashub (its preprocessor): sequence length "
                     "(default for a run_classifier.py run: the run's).")
flags.DEFINE_enum("quantize", "none", ["none", "int8"], "--to=savedmodel: int8 runs the Transformer blocks' dense "
                  "layers in 8 bits (as run_classifier.py --quantize=int8 does; serving it needs a TensorFlow with "
                  "oneDNN's kernels); none: float32.")
flags.DEFINE_bool("tflite", False, "--to=savedmodel of a classifier: also write model.tflite, the classifier on "
                  "packed token ids for TensorFlow Lite runtimes (with vocab.txt and label_list.txt); with "
                  "--quantize=int8 it is TensorFlow Lite's dynamic-range int8 and the SavedModel float32.")
flags.DEFINE_bool("force", False, "Write even when the target cannot express the model (e.g. a RealFormer "
                  "or Pre-LN model as Hugging Face's BertModel, which would compute plain BERT) or weights "
                  "would be left out (fine-tuning heads in --to=hf, unknown Hugging Face weights, a Hugging Face "
                  "model without its pooler); every weight left out is listed.")


require_flags("to", "input", "output")

# Moved in last (and removed first): the configs (ours and TF1's; Hugging Face's and KerasHub's)
# and the file whose presence makes a SavedModel.
LAST_FILES = ("bert_config.json", "config.json", "saved_model.pb")
# What a conversion to a weight format writes (every format's, every tokenizer kind's): of these,
# what --output holds from an earlier conversion and this one does not write is removed, so that
# no reader takes an old tokenizer (or weights) beside the new model.
CONVERSION_FILES = ("bert_config.json", "config.json", "vocab.txt", "spiece.model", "vocab.json", "merges.txt",
                    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "model.safetensors",
                    "label_list.txt", "checkpoint", "bert_model.ckpt.*", "metadata.json", "model.weights.h5",
                    "preprocessor.json", "task.json", "task.weights.h5", "assets/tokenizer/*", "training_state/*")


def main(argv):
    del argv
    from bert_realformer.checkpoints import conversion, formats
    for name, known in (("from", (conversion.AUTO, *formats.known())), ("to", (*formats.known(), "savedmodel"))):
        if FLAGS[name].value not in known:
            raise InputError(f"--{name}={FLAGS[name].value}: unknown format; expected one of {', '.join(known)}")
    storage.check_dir_target(FLAGS.output, "output")
    if _within(FLAGS.input, FLAGS.output):
        raise InputError(f"--output={FLAGS.output} holds --input={FLAGS.input}: a conversion replaces what is "
                         "there; write it to another directory")
    with tempfile.TemporaryDirectory(prefix="convert-") as scratch:  # (what reading makes, e.g. a vocab.txt)
        weights = conversion.read(FLAGS["from"].value, FLAGS.input, FLAGS.bert_config_file, FLAGS.vocab_file,
                                  FLAGS.force, FLAGS.to, scratch)
        _convert(weights)


def _convert(weights):
    """Writes `weights` as --to says, whole or not at all, and says what it wrote."""
    import modeling
    from bert_realformer.checkpoints import conversion
    from bert_realformer.inference.engines import engine_for, make_engine
    from bert_realformer.inference.export import ServedText, export_model
    if FLAGS.to == "savedmodel" and weights.vocab_file is None:
        raise InputError("--to=savedmodel needs --vocab_file (no vocab.txt beside --input)")
    head = conversion.unserved_head(weights) if FLAGS.to == "savedmodel" else None
    if head:
        raise InputError(f"--input={FLAGS.input} holds {head[0]}: --to=savedmodel serves classifiers and encoders, "
                         f"and would drop it; {head[1]} predicts with it")
    if FLAGS.quantize != "none" and FLAGS.to != "savedmodel":
        raise InputError(f"--quantize={FLAGS.quantize} is for --to=savedmodel; --to={FLAGS.to} writes float32 weights")
    if FLAGS.tflite and FLAGS.to != "savedmodel":
        raise InputError(f"--tflite is for --to=savedmodel; --to={FLAGS.to} writes no model.tflite")
    print(f"read {len(weights.values)} weights from {FLAGS.input}; writing --to={FLAGS.to} beside {FLAGS.output} "
          "(switched in when whole)", file=sys.stderr, flush=True)
    staging = f"{FLAGS.output.rstrip('/')}.tmp-{os.getpid()}"
    try:
        if FLAGS.to == "savedmodel":
            reading = _classifier_input(FLAGS.input)
            max_seq_length = FLAGS.max_seq_length if FLAGS["max_seq_length"].present else reading.get(
                "max_seq_length", FLAGS.max_seq_length)
            model = conversion.model_for(weights)
            engine = make_engine(engine_for(quantize=FLAGS.quantize, tflite=FLAGS.tflite), model)
            if engine.writes and not isinstance(model, modeling.BertClassifier):
                raise InputError("tflite writes a classifier's TensorFlow Lite model; this checkpoint holds no "
                                 "classifier", options=("tflite",))
            text = ServedText(weights.vocab_file, FLAGS.do_lower_case, max_seq_length,
                              reading.get("truncation", "head"), reading.get("doc_stride"),
                              reading.get("window_pooling", "mean"))
            path = export_model(model, text, staging, weights.labels,
                                reading.get("thresholds") if reading.get("multi_label") else None, engine)
            written = [os.path.relpath(path, staging)]
            stale = []
        else:
            written = conversion.write(FLAGS.to, staging, weights, FLAGS.do_lower_case, FLAGS.max_seq_length,
                                       FLAGS.force)
            stale = _earlier_conversion_files(FLAGS.output, storage.files_under(staging))
        # Whole or not at all: a crash between two files must not leave new weights beside an
        # old config of the same sizes (a variant key would differ silently).
        storage.switch_in(staging, FLAGS.output, last=LAST_FILES, stale=stale)
    finally:
        storage.rmtree(staging)
    if weights.vocab_file is None:
        weights.notes.append(f"note: no vocabulary given or found beside --input={FLAGS.input}: {FLAGS.output} has "
                             "no tokenizer files (give --vocab_file to write them)")
    for note in weights.notes:
        print(note, file=sys.stderr)
    print(f"{FLAGS['from'].value} -> {FLAGS.to}: {conversion.describe(weights)}; wrote {', '.join(written)} "
          f"in {FLAGS.output}")


def _within(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or lies in it."""
    def normal(p):
        return os.path.abspath(p.removeprefix("file://")) if storage.is_local(p) else p.rstrip("/")
    path, directory = normal(path), normal(directory)
    return path == directory or path.startswith(directory + "/")


def _earlier_conversion_files(output: str, written: list[str]) -> list[str]:
    """The files of `output` an earlier conversion wrote (`CONVERSION_FILES`) that are not among
    `written` (relative paths)."""
    if not storage.isdir(output):
        return []
    new = set(written)
    return [name for name in storage.files_under(output)
            if name not in new and any(fnmatch.fnmatch(name, pattern) for pattern in CONVERSION_FILES)]


def _classifier_input(path):
    """How the run_classifier.py run that wrote `path` (its directory, a checkpoint in it, its
    training_state/ or best/) read its texts ({} for other checkpoints)."""
    from bert_realformer.tasks.classification.windows import served_reading
    from bert_realformer.training import recorded_options
    directory = (path if storage.isdir(path) else os.path.dirname(path)).rstrip("/")
    candidates = [directory]
    if os.path.basename(directory) in ("training_state", "best"):
        candidates.append(os.path.dirname(directory))
    for candidate in candidates:
        reading = recorded_options.read(candidate).get("classifier_input")
        if reading:
            doc_stride, pooling, truncation = served_reading(
                reading.get("doc_stride"), reading.get("window_pooling", "mean"), reading.get("truncation", "head"))
            shown = (f"windows of {reading['max_seq_length']} tokens, {doc_stride} apart, {pooling} pooling"
                     if doc_stride else f"{reading['max_seq_length']} tokens, {truncation} truncation")
            print(f"serving texts as the run read them: {shown}", file=sys.stderr)
            return {**reading, "doc_stride": doc_stride, "window_pooling": pooling, "truncation": truncation}
    return {}


entry = script_entry(main, __doc__)  # the installed command `bert-convert-checkpoint`

if __name__ == "__main__":
    entry()
