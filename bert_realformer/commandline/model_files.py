"""The model's files from a script's flags, checked before TensorFlow starts: `--bert_config_file`
and `--vocab_file` left out are the checkpoint's own (found beside `--init_checkpoint`, whatever
form it has: a TF1 release, a Hugging Face directory, a KerasHub preset, a run), each exists,
`--max_seq_length` fits the config's positions, and the vocabulary is the checkpoint's own. A
mistake ends the script in one line with nothing written and TensorFlow never imported.

    complete_model_files()  # in a script's flag checks, before anything imports TensorFlow
    FLAGS.bert_config_file  # now the file the run reads
"""

import os

from absl import flags

from bert_realformer import storage
from bert_realformer.checkpoints import bundle_index, config_files, files_beside, formats
from bert_realformer.errors import InputError
from tokenization.vocabularies import vocabulary_kind


def complete_model_files(vocabulary: bool = True) -> None:
    """Sets `--bert_config_file` and (where the script has it and `vocabulary`: the run reads
    text) `--vocab_file`, when not given, to the files beside `--init_checkpoint`, and checks
    them as the module docstring says (the vocabulary's ownership unless `--allow_foreign_vocab`)."""
    FLAGS = flags.FLAGS
    init_checkpoint = FLAGS.init_checkpoint
    if init_checkpoint:
        _check_exists(init_checkpoint)
    FLAGS.bert_config_file = _given_or_own("bert_config_file", files_beside.own_config_file)
    declared = config_files.declared_positions(FLAGS.bert_config_file)
    if declared is not None:
        config_files.check_sequence_length(FLAGS.max_seq_length, *declared, FLAGS.bert_config_file)
    if init_checkpoint:
        _check_release_shapes(init_checkpoint, FLAGS.bert_config_file)
    if "vocab_file" not in FLAGS or not vocabulary:
        return
    FLAGS.vocab_file = _given_or_own("vocab_file", files_beside.own_vocab_file)
    allowed = "allow_foreign_vocab" in FLAGS and FLAGS.allow_foreign_vocab
    if init_checkpoint and vocabulary_kind(FLAGS.vocab_file) == "wordpiece" and not allowed:
        files_beside.check_vocabulary_belongs(FLAGS.vocab_file, init_checkpoint)


def _check_exists(init_checkpoint: str) -> None:
    """An error unless `init_checkpoint` is there (a directory, or a prefix with its index), or
    naming the directory it is in when that cannot be read."""
    if formats.checkpoint_exists(init_checkpoint):
        if storage.isdir(init_checkpoint):
            storage.check_readable_dir(init_checkpoint)
        return
    parent = os.path.dirname(init_checkpoint.rstrip("/"))
    if parent and storage.isdir(parent):
        storage.check_readable_dir(parent)
    raise InputError(f"--init_checkpoint={init_checkpoint}: no such file or directory")


def _check_release_shapes(init_checkpoint: str, config_file: str) -> None:
    """The embedding tables of a TF1 release's index against those its config declares (a
    config of another model); what this cannot read plainly is checked once TensorFlow runs."""
    prefix = files_beside.release_prefix(init_checkpoint)
    expected = config_files.declared_embedding_shapes(config_file)
    if prefix is None or not expected:
        return
    try:
        stored = bundle_index.stored_shapes(prefix)
    except bundle_index.UnreadableIndex:
        return
    config_files.check_shapes_agree(prefix, stored, expected)


def _given_or_own(name: str, own_file) -> str:
    """--NAME's file, checked to exist, else `own_file(--init_checkpoint)`'s."""
    FLAGS = flags.FLAGS
    given, init_checkpoint = FLAGS[name].value, FLAGS.init_checkpoint
    if given:
        if not storage.isfile(given):
            raise InputError(f"--{name}={given}: no such file")
        return given
    if not init_checkpoint:
        raise InputError(f"--{name} is required (or --init_checkpoint, whose own is used)")
    found = own_file(init_checkpoint)
    if found is None:
        raise InputError(f"--{name} is required: --init_checkpoint={init_checkpoint} has none beside it")
    return found
