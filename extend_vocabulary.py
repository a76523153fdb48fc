"""A released checkpoint's vocabulary grown by a domain's tokens.

Its module is `bert_realformer/cli/extend_vocabulary.py`,
installed as the command `bert-extend-vocabulary`; `--help` lists its flags."""

from bert_realformer.cli.extend_vocabulary import entry

if __name__ == "__main__":
    entry()
