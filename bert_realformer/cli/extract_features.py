"""Fixed contextual features from BERT layers, as the original extract_features.py (the
feature-based use of BERT in the BERT paper).

    python extract_features.py --input_file=input.txt --output_file=output.jsonl \\
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

--init_checkpoint may be any form the scripts read (a Hugging Face directory such as
all-MiniLM-L6-v2, a KerasHub preset, a run); --vocab_file and --bert_config_file default to
those beside it. Input: one example per line, `text_a` or `text_a ||| text_b`. Output: one JSON object per line,
{"linex_index": N, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]},
...]}, ...]}, values rounded to 6 decimals, for the real tokens of each example.

Sentence embeddings, one vector per line (`--pooling`): {"linex_index": N, "embedding": [...]},
the mean of the line's real tokens' vectors (`mean`, [CLS] and [SEP] included) or its [CLS]
token's (`cls`), of the last layer (with --layers given, of the mean of those layers), divided by
its L2 norm with --normalize:

    python extract_features.py ... --pooling=mean --normalize
"""

import json
import sys

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.model_files import complete_model_files
from bert_realformer.commandline.runner import script_entry
from bert_realformer.commandline.training_flags import define_foreign_vocab_flag, define_model_file_flags
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input text, one example per line ('text_a' or 'text_a ||| text_b').")
flags.DEFINE_string("output_file", None, "Output JSON lines.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Encoder layers to output (negative counts from the last).")
define_model_file_flags()
define_foreign_vocab_flag()
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after WordPiece tokenization.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model): a TF1 "
                    "checkpoint, a run, a Hugging Face directory or a KerasHub preset.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; prediction runs on the default device.")
flags.DEFINE_string("master", None, "Accepted for compatibility.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility.")
flags.DEFINE_bool("dynamic_padding", True, "Pad each batch to its longest sequence (rounded up to a multiple of 8) "
                  "instead of --max_seq_length; the features are the same.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility (the lookup gives the same values).")
flags.DEFINE_enum("pooling", "none", ["none", "mean", "cls"], "none: every token's vectors (the original's output). "
                  "mean or cls: one vector per line, the mean over its real tokens or its [CLS] token's, of the "
                  "last layer (with --layers given, of the mean of those layers).")
flags.DEFINE_bool("normalize", False, "With --pooling: each vector divided by its L2 norm (cosine similarity is then "
                  "a dot product).")

def main(argv):
    del argv
    for name in ("input_file", "output_file", "init_checkpoint"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    storage.check_file_target(FLAGS.output_file, "output_file")
    complete_model_files()
    if FLAGS.normalize and FLAGS.pooling == "none":
        raise InputError("--normalize is for --pooling=mean or --pooling=cls (one vector per line)")
    pooled = FLAGS.pooling != "none"
    try:
        layer_indexes = [int(x) for x in FLAGS.layers.split(",")] if FLAGS["layers"].present or not pooled else [-1]
    except ValueError:
        raise InputError(f"--layers={FLAGS.layers}: expected comma-separated integers") from None
    import numpy as np
    import tensorflow as tf

    import modeling
    from bert_realformer.checkpoints.config_files import read_config  # (imports TensorFlow)
    from bert_realformer.checkpoints.hf_family import POOLER_WEIGHTS
    from bert_realformer.checkpoints.training_states import describe, load_weights, resolve
    from bert_realformer.tasks.text_features import read_text_examples, text_features
    from bert_realformer.training.setup import checked_tokenizer
    config = read_config(FLAGS.bert_config_file)
    for index in layer_indexes:
        if not -config.num_hidden_layers <= index < config.num_hidden_layers:
            raise InputError(f"--layers: {index} is not a layer of this {config.num_hidden_layers}-layer model")
    tokenizer = checked_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case, config.vocab_size)
    model = modeling.BertModel(config)
    model.build()
    checkpoint = resolve(FLAGS.init_checkpoint)  # a TF1 checkpoint, ours, or a run directory
    # (the pooler may be missing, as from a Hugging Face masked LM: no feature reads it)
    print(describe(checkpoint, load_weights(model, checkpoint, strict=True, needless=POOLER_WEIGHTS)),
          file=sys.stderr)
    all_tokens, arrays = text_features(read_text_examples(FLAGS.input_file), tokenizer, FLAGS.max_seq_length)

    from bert_realformer.inference.padding import LENGTH_MULTIPLE

    @tf.function(reduce_retracing=True, autograph=False)
    def layers_of(features):
        layers = model(features, training=False)["all_encoder_layers"]
        chosen = [layers[i] for i in layer_indexes]
        if not pooled:
            return chosen
        mean = tf.add_n(chosen) / len(chosen) if len(chosen) > 1 else chosen[0]
        return modeling.sentence_embedding(mean, features["input_mask"], FLAGS.pooling, FLAGS.normalize)

    with storage.atomic_output(FLAGS.output_file) as writer:
        for start in range(0, len(all_tokens), FLAGS.batch_size):
            batch = {k: v[start:start + FLAGS.batch_size] for k, v in arrays.items()}
            if FLAGS.dynamic_padding:  # cut to the batch's longest sequence, rounded up
                longest = int(batch["input_mask"].sum(axis=1).max())
                length = min(-(-longest // LENGTH_MULTIPLE) * LENGTH_MULTIPLE, FLAGS.max_seq_length)
                batch = {k: v[:, :length] for k, v in batch.items()}
            if pooled:
                for row, vector in enumerate(np.asarray(layers_of(batch))):
                    writer.write(json.dumps({"linex_index": start + row,
                                             "embedding": [round(float(x), 6) for x in vector]}) + "\n")
                continue
            layers = [np.asarray(layer) for layer in layers_of(batch)]
            for row, tokens in enumerate(all_tokens[start:start + FLAGS.batch_size]):
                entry = {"linex_index": start + row, "features": [
                    {"token": token, "layers": [{"index": index, "values": [round(float(x), 6) for x in layer[row, i]]}
                                                for index, layer in zip(layer_indexes, layers, strict=True)]}
                    for i, token in enumerate(tokens)]}
                writer.write(json.dumps(entry) + "\n")
    print(f"wrote {FLAGS.output_file} ({len(all_tokens)} lines)", file=sys.stderr)


entry = script_entry(main, __doc__)  # the installed command `bert-extract-features`

if __name__ == "__main__":
    entry()
