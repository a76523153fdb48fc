"""Post-LN, Pre-LN and RealFormer compared over seeds and downstream tasks.

Its module is `bert_realformer/cli/run_study.py`,
installed as the command `bert-run-study`; `--help` lists its flags."""

from bert_realformer.cli.run_study import entry

if __name__ == "__main__":
    entry()
