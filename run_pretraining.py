"""MLM + NSP pretraining and evaluation, as the original script.

Its module is `bert_realformer/cli/run_pretraining.py`,
installed as the command `bert-run-pretraining`; `--help` lists its flags."""

from bert_realformer.cli.run_pretraining import entry

if __name__ == "__main__":
    entry()
