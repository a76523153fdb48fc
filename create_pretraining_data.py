"""Raw text to MLM/NSP TFRecords, as the original script.

Its module is `bert_realformer/cli/create_pretraining_data.py`,
installed as the command `bert-create-pretraining-data`; `--help` lists its flags."""

from bert_realformer.cli.create_pretraining_data import entry

if __name__ == "__main__":
    entry()
