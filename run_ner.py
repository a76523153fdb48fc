"""Fine-tuning for named-entity recognition, optionally with a CRF.

Its module is `bert_realformer/cli/run_ner.py`,
installed as the command `bert-run-ner`; `--help` lists its flags."""

from bert_realformer.cli.run_ner import entry

if __name__ == "__main__":
    entry()
