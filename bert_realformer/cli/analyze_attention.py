"""Attention entropy and adjacent-layer Jensen-Shannon divergence per layer and head (the
RealFormer paper's analysis) for a checkpoint, over pretraining TFRecords or text lines.

    python analyze_attention.py --bert_config_file=out/bert_config.json --init_checkpoint=out/model.ckpt-1000 \\
      --input_file=data.tfrecord --max_seq_length=128 --max_predictions_per_seq=20 --output_dir=analysis
    python analyze_attention.py ... --text_file=sentences.txt --vocab_file=out/vocab.txt

--init_checkpoint may be any form the scripts read; --bert_config_file and --vocab_file default
to those beside it. Writes OUTPUT_DIR/attention_stats.json and attention_entropy.png, attention_jsd.png.
"""

import json
import os
import sys

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.model_files import complete_model_files
from bert_realformer.commandline.runner import script_entry
from bert_realformer.commandline.training_flags import define_model_file_flags
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS
define_model_file_flags()
flags.DEFINE_string("init_checkpoint", None, "The checkpoint to analyse: a TF1 checkpoint, a run (its latest "
                    "weights), a Hugging Face directory or a KerasHub preset.")
flags.DEFINE_string("input_file", None, "Pretraining TFRecords (globs, comma-separated).")
flags.DEFINE_string("text_file", None, "Or: text, one example per line ('a' or 'a ||| b').")
flags.DEFINE_bool("do_lower_case", True, "For --text_file.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length (must match the records).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Must match the records.")
flags.DEFINE_integer("batch_size", 16, "Examples per batch.")
flags.DEFINE_integer("max_examples", 512, "Examples to analyse.")
flags.DEFINE_string("output_dir", None, "Where to write the statistics and plots.")
flags.DEFINE_string("title", "", "Plot title prefix (e.g. the model variant).")


def batches(vocab_size):
    if FLAGS.input_file:
        from bert_realformer.pretraining.input_pipeline import expand_input_files, make_dataset
        files = expand_input_files(FLAGS.input_file)
        dataset = make_dataset(files, FLAGS.batch_size, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, False)
        count = 0
        for features in dataset:
            yield {"input_ids": features["input_ids"].numpy(), "input_mask": features["input_mask"].numpy(),
                   "token_type_ids": features["segment_ids"].numpy()}
            count += FLAGS.batch_size
            if count >= FLAGS.max_examples:
                return
        return
    from bert_realformer.tasks.text_features import read_text_examples, text_features
    from bert_realformer.training.setup import checked_tokenizer
    tokenizer = checked_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case, vocab_size)
    _, arrays = text_features(read_text_examples(FLAGS.text_file, "text_file")[:FLAGS.max_examples], tokenizer,
                              FLAGS.max_seq_length)
    for start in range(0, len(arrays["input_ids"]), FLAGS.batch_size):
        yield {k: v[start:start + FLAGS.batch_size] for k, v in arrays.items()}


def main(argv):
    del argv
    for name in ("init_checkpoint", "output_dir"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if bool(FLAGS.input_file) == bool(FLAGS.text_file):
        raise InputError("give one of --input_file (TFRecords) or --text_file")
    complete_model_files(vocabulary=bool(FLAGS.text_file))
    from bert_realformer import optional
    optional.require("matplotlib", "analyze_attention.py's plots")  # (before the model runs)
    import tensorflow as tf

    import modeling
    from bert_realformer.checkpoints.config_files import read_config  # (imports TensorFlow)
    from bert_realformer.checkpoints.hf_family import POOLER_WEIGHTS
    from bert_realformer.checkpoints.training_states import describe, load_weights, resolve
    from bert_realformer.comparison.attention_analysis import AttentionStatistics, plot
    config = read_config(FLAGS.bert_config_file)
    model = modeling.BertModel(config)
    model.build()
    checkpoint = resolve(FLAGS.init_checkpoint)
    # (the pooler may be missing, as from a Hugging Face masked LM: attention never reads it)
    print(describe(checkpoint, load_weights(model, checkpoint, strict=True, needless=POOLER_WEIGHTS)),
          file=sys.stderr)
    attention_probs = tf.function(lambda batch: model(batch, training=False, output_attention_probs=True)
                                  ["attention_probs"], autograph=False)
    stats = AttentionStatistics(config.num_hidden_layers, config.num_attention_heads)
    for batch in batches(config.vocab_size):
        stats.add(attention_probs(batch), batch["input_mask"])
    storage.makedirs(FLAGS.output_dir)
    summary = {"config": config.to_dict(), "checkpoint": FLAGS.init_checkpoint, **stats.summary()}
    storage.write_atomic(os.path.join(FLAGS.output_dir, "attention_stats.json"), json.dumps(summary, indent=1))
    prefix = f"{FLAGS.title}: " if FLAGS.title else ""
    plot(stats.entropies, prefix + "attention entropy per token",
         os.path.join(FLAGS.output_dir, "attention_entropy.png"), "entropy (nats)")
    if config.num_hidden_layers > 1:
        plot(stats.divergences, prefix + "JSD between adjacent layers, same head",
             os.path.join(FLAGS.output_dir, "attention_jsd.png"), "JSD (nats)")
    print(f"wrote {FLAGS.output_dir}/attention_stats.json and plots")


entry = script_entry(main, __doc__)  # the installed command `bert-analyze-attention`

if __name__ == "__main__":
    entry()
