"""The RealFormer paper's attention analysis of a checkpoint.

Its module is `bert_realformer/cli/analyze_attention.py`,
installed as the command `bert-analyze-attention`; `--help` lists its flags."""

from bert_realformer.cli.analyze_attention import entry

if __name__ == "__main__":
    entry()
