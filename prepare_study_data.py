"""The real data of `make demo` and `make study`.

Its module is `bert_realformer/cli/prepare_study_data.py`,
installed as the command `bert-prepare-study-data`; `--help` lists its flags."""

from bert_realformer.cli.prepare_study_data import entry

if __name__ == "__main__":
    entry()
