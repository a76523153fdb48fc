"""Fixed features from BERT layers, as the original script.

Its module is `bert_realformer/cli/extract_features.py`,
installed as the command `bert-extract-features`; `--help` lists its flags."""

from bert_realformer.cli.extract_features import entry

if __name__ == "__main__":
    entry()
