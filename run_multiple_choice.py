"""Fine-tuning for multiple choice (SWAG, or your own JSON lines).

Its module is `bert_realformer/cli/run_multiple_choice.py`,
installed as the command `bert-run-multiple-choice`; `--help` lists its flags."""

from bert_realformer.cli.run_multiple_choice import entry

if __name__ == "__main__":
    entry()
