"""Checkpoints between TF1, ours, Hugging Face and KerasHub; SavedModel export.

Its module is `bert_realformer/cli/convert_checkpoint.py`,
installed as the command `bert-convert-checkpoint`; `--help` lists its flags."""

from bert_realformer.cli.convert_checkpoint import entry

if __name__ == "__main__":
    entry()
