"""Fixed contextual features from BERT layers, as the original extract_features.py (the
feature-based use of BERT in the BERT paper).

    python extract_features.py --input_file=input.txt --output_file=output.jsonl \\
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

Input: one example per line, `text_a` or `text_a ||| text_b`. Output: one JSON object per line,
{"linex_index": N, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]},
...]}, ...]}, values rounded to 6 decimals, for the real tokens of each example.
"""

import json
import os
import re

from absl import flags

from cli import InputError, run

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input text, one example per line ('text_a' or 'text_a ||| text_b').")
flags.DEFINE_string("output_file", None, "Output JSON lines.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Encoder layers to output (negative counts from the last).")
flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after WordPiece tokenization.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; prediction runs on the default device.")
flags.DEFINE_string("master", None, "Accepted for compatibility.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility (the lookup gives the same values).")

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(path):
    """[(unique_id, text_a, text_b or None)] from the input file."""
    if not os.path.isfile(path):
        raise InputError(f"--input_file={path}: no such file")
    examples = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            match = _PAIR.match(line)
            text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
            examples.append((len(examples), text_a, text_b))
    return examples


def convert(examples, tokenizer, max_seq_length):
    """-> [(tokens, input_ids, input_mask, segment_ids)] as the original (truncation included)."""
    from tasks.classifier_features import truncate_seq_pair
    out = []
    for _, text_a, text_b in examples:
        a = tokenizer.tokenize(text_a)
        b = tokenizer.tokenize(text_b) if text_b is not None else None
        if b is not None:
            truncate_seq_pair(a, b, max_seq_length - 3)
        else:
            a = a[:max_seq_length - 2]
        tokens = ["[CLS]", *a, "[SEP]"] + ([*b, "[SEP]"] if b is not None else [])
        segment_ids = [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b is not None else [])
        pad = [0] * (max_seq_length - len(tokens))
        out.append((tokens, tokenizer.convert_tokens_to_ids(tokens) + pad, [1] * len(tokens) + pad,
                    segment_ids + pad))
    return out


def main(argv):
    del argv
    for name in ("input_file", "output_file", "bert_config_file", "vocab_file", "init_checkpoint"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    try:
        layer_indexes = [int(x) for x in FLAGS.layers.split(",")]
    except ValueError:
        raise InputError(f"--layers={FLAGS.layers}: expected comma-separated integers") from None
    import numpy as np

    import modeling
    from tokenization import FullTokenizer
    config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
    for index in layer_indexes:
        if not -config.num_hidden_layers <= index < config.num_hidden_layers:
            raise InputError(f"--layers: {index} is not a layer of this {config.num_hidden_layers}-layer model")
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    model = modeling.BertModel(config)
    modeling.load_tf1_checkpoint(model, FLAGS.init_checkpoint)
    features = convert(read_examples(FLAGS.input_file), tokenizer, FLAGS.max_seq_length)
    tmp = f"{FLAGS.output_file}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as writer:
        for start in range(0, len(features), FLAGS.batch_size):
            batch = features[start:start + FLAGS.batch_size]
            out = model({"input_ids": np.array([f[1] for f in batch], "int32"),
                         "input_mask": np.array([f[2] for f in batch], "int32"),
                         "token_type_ids": np.array([f[3] for f in batch], "int32")})
            layers = [np.asarray(out["all_encoder_layers"][i]) for i in layer_indexes]
            for row, (tokens, *_) in enumerate(batch):
                entry = {"linex_index": start + row, "features": [
                    {"token": token, "layers": [{"index": index, "values": [round(float(x), 6) for x in layer[row, i]]}
                                                for index, layer in zip(layer_indexes, layers)]}
                    for i, token in enumerate(tokens)]}
                writer.write(json.dumps(entry) + "\n")
    os.replace(tmp, FLAGS.output_file)


if __name__ == "__main__":
    run(main)
