"""Fine-tuning and prediction for SQuAD v1.1/v2.0 and Chinese MRC, as the original script.

Its module is `bert_realformer/cli/run_squad.py`,
installed as the command `bert-run-squad`; `--help` lists its flags."""

from bert_realformer.cli.run_squad import entry

if __name__ == "__main__":
    entry()
