"""Fine-tuning for sentence and sentence-pair classification, as the original script.

Its module is `bert_realformer/cli/run_classifier.py`,
installed as the command `bert-run-classifier`; `--help` lists its flags."""

from bert_realformer.cli.run_classifier import entry

if __name__ == "__main__":
    entry()
