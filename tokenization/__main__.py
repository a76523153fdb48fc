"""Tokenize lines from stdin: one JSON list of token ids (or `--tokens`: token strings) per line.

    echo "Hello, world!" | python -m tokenization --vocab_file=vocab.txt --do_lower_case=true [--fast]
"""

import json
import sys

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.runner import run
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text (uncased models).")
flags.DEFINE_bool("fast", False, "Use the tensorflow-text fast path (same ids as the reference).")
flags.DEFINE_bool("tokens", False, "Write token strings instead of ids.")
flags.DEFINE_integer("batch_lines", 4096, "Lines per batch on the fast path.")


def _batches(stream, size):
    batch = []
    for line in stream:
        batch.append(line.rstrip("\n"))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def main(argv):
    del argv
    if not FLAGS.vocab_file:
        raise InputError("--vocab_file is required")
    if not storage.isfile(FLAGS.vocab_file):
        raise InputError(f"--vocab_file={FLAGS.vocab_file}: no such file")
    from tokenization.full import FullTokenizer
    reference = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    if FLAGS.fast:
        from tokenization.fast import FastTokenizer
        fast = FastTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
        encode = fast.tokenize_to_lists
    else:
        def encode(lines):
            return [reference.convert_tokens_to_ids(reference.tokenize(line)) for line in lines]
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", newline="\n", closefd=False)
    for lines in _batches(stdin, FLAGS.batch_lines):
        for ids in encode(lines):
            out = reference.convert_ids_to_tokens(ids) if FLAGS.tokens else ids
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    run(main)
