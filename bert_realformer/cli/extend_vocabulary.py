"""Adds a domain's tokens to a released checkpoint's vocabulary.

    python extend_vocabulary.py --vocab_file=chinese_roberta_wwm_ext/vocab.txt \\
      --bert_config_file=chinese_roberta_wwm_ext/bert_config.json \\
      --init_checkpoint=chinese_roberta_wwm_ext/bert_model.ckpt \\
      --new_tokens=domain_tokens.txt --output_dir=extended

--init_checkpoint may be any form the scripts read (a Hugging Face directory, a KerasHub
preset, a run); --vocab_file and --bert_config_file default to those beside it.
OUTPUT_DIR gets vocab.txt (the old lines unchanged, the new tokens appended in file order),
bert_config.json (the new vocab_size) and bert_model.ckpt, in the layout of the released
checkpoints: every script takes it as --init_checkpoint. New tokens start from the mean
embedding (and MLM output bias) of the pieces the old vocabulary cut them into; tokens the old
vocabulary could only call [UNK] start from [UNK]'s. Tokens already present are skipped and
listed. A token the tokenizer would never produce whole (a Chinese word of several characters,
a token with punctuation inside) stops the script before anything is written. Optimizer slots
in the checkpoint are left out.
"""

import json
import sys

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.runner import script_entry
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

FLAGS = flags.FLAGS

flags.DEFINE_string("vocab_file", None, "The vocabulary the checkpoint was trained with (default: the one beside it).")
flags.DEFINE_string("bert_config_file", None, "The checkpoint's bert_config.json (default: the config beside it).")
flags.DEFINE_string("init_checkpoint", None, "The checkpoint to extend: a TF1 prefix or directory, a Hugging Face "
                    "directory, a KerasHub preset, or one of our runs or training states.")
flags.DEFINE_string("new_tokens", None, "A UTF-8 file with one new token per line (blank lines skipped).")
flags.DEFINE_string("output_dir", None, "Where vocab.txt, bert_config.json and bert_model.ckpt are written.")
flags.DEFINE_bool("do_lower_case", True, "As the tokenizer the model is used with (True for uncased and Chinese "
                  "models): tokens must be given as it sees them.")


def _read_weights(path, config_file, vocab_file):
    """The checkpoint's `Weights` (its model weights under TF1 names, its config and vocabulary),
    read by the one loader whatever form it has, and whether optimizer slots were left out."""
    from bert_realformer.checkpoints import checkpoint_keys, training_states
    from bert_realformer.checkpoints.pretrained import read_pretrained
    try:
        weights = read_pretrained(path, config_file, vocab_file)
    except InputError as error:  # (the loader names what it reads `input`, as the conversion's flag)
        if "input" not in error.options:
            raise
        reason = str(error).removeprefix("input: ")
        raise InputError(f"--init_checkpoint={path}: {reason}", options=("init_checkpoint",)) from None
    found = training_states.resolve(path)
    if found.kind == training_states.TRAINING_STATE_KIND:
        return weights, True
    slots = found.weight_format is None and any(
        key.endswith(("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")) for key in checkpoint_keys(found.prefix))
    return weights, slots


def _config(weights):
    """The config to extend: --bert_config_file's keys as written (keys of ours and the original's
    alike), else the checkpoint's own."""
    if not FLAGS.bert_config_file:
        return weights.config.to_dict()
    try:
        return json.loads(read_text(FLAGS.bert_config_file))
    except ValueError as error:
        raise InputError(f"--bert_config_file={FLAGS.bert_config_file}: not JSON ({error})",
                         options=("bert_config_file",)) from None


def main(argv):
    del argv
    for name in ("init_checkpoint", "new_tokens", "output_dir"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if FLAGS.bert_config_file and not storage.isfile(FLAGS.bert_config_file):
        raise InputError(f"--bert_config_file={FLAGS.bert_config_file}: no such file")
    from bert_realformer.pretraining import vocabulary_extension as extension
    tokens = extension.read_new_tokens(FLAGS.new_tokens)
    weights, slots_left_out = _read_weights(FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file)
    vocab_file = FLAGS.vocab_file or weights.vocab_file
    if not vocab_file:
        raise InputError(f"--vocab_file is required: {FLAGS.init_checkpoint} has no vocabulary beside it",
                         options=("vocab_file",))
    plan = extension.plan_extension(tokens, vocab_file, FLAGS.do_lower_case, FLAGS.new_tokens)
    storage.check_writable_dir(FLAGS.output_dir, "output_dir")
    values = extension.extended_weights(plan, weights.values)
    extension.write_extension(plan, values, _config(weights), FLAGS.output_dir)
    size = plan.old_size + len(plan.added)
    added = (f"added {len(plan.added)} tokens (ids {plan.old_size}-{size - 1}; vocab_size {plan.old_size} -> {size})"
             if plan.added else f"added no tokens (vocab_size stays {size})")
    print(added
          + (f"; skipped, already in the vocabulary: {' '.join(plan.skipped)}" if plan.skipped else "")
          + (f"; starting from [UNK]'s row (the old vocabulary had no pieces for them): {' '.join(plan.unknown)}"
             if plan.unknown else "")
          + ("; optimizer slots left out" if slots_left_out else ""), file=sys.stderr)
    print(f"wrote vocab.txt, bert_config.json and bert_model.ckpt in {FLAGS.output_dir}", file=sys.stderr)


entry = script_entry(main, __doc__)  # the installed command `bert-extend-vocabulary`

if __name__ == "__main__":
    entry()
