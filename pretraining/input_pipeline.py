"""Reading pretraining TFRecords with tf.data, as the original `input_fn_builder`.

Training: the files are shuffled and read interleaved (4 at once, the original's
`num_cpu_threads`, on every host alike), records shuffled with a buffer, repeated forever; the
sequence is a function of the seed only, and `start_batch` resumes it at that batch. Evaluation:
files in order, repeated (evaluation runs a fixed number of steps). Batches drop the
remainder; int64 features become int32.
"""

from bert_realformer import storage
from bert_realformer.errors import InputError
from pretraining.records import feature_spec

CYCLE_LENGTH = 4  # files read at once in training (the original's num_cpu_threads default)


def expand_input_files(spec, flag="--input_file"):
    """Comma-separated globs -> sorted files; one-line errors for no match or empty files."""
    files = storage.expand_file_patterns(spec, flag)
    for path in files:
        if storage.size(path) == 0:
            raise InputError(f"{flag}: {path} is empty")
    return files


def check_records(files, max_seq_length, max_predictions_per_seq, vocab_size, sample=16):
    """Parses the first `sample` records of each file: their lengths must match the flags and
    their token ids must be below the config's `vocab_size` (records made with another
    vocabulary would fail mid-step on CPU and embed zeros on a GPU)."""
    import tensorflow as tf
    expected = {"input_ids": max_seq_length, "masked_lm_positions": max_predictions_per_seq}
    flags = {"input_ids": "--max_seq_length", "masked_lm_positions": "--max_predictions_per_seq"}
    spec = {name: tf.io.VarLenFeature(tf.int64) for name in (*expected, "masked_lm_ids")}
    for path in files:
        try:
            records = [r.numpy() for r in tf.data.TFRecordDataset(path).take(sample)]
        except tf.errors.OpError as error:
            raise InputError(f"{path}: not a readable TFRecord file ({error.message.splitlines()[0]})") from None
        if not records:
            raise InputError(f"{path}: holds no records")
        for index, record in enumerate(records):
            try:
                parsed = {k: v.values.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
            except tf.errors.OpError:
                raise InputError(f"{path}: records are not pretraining examples "
                                 "(expected input_ids, masked_lm_positions, ...)") from None
            for name, length in expected.items():
                if parsed[name].size != length:
                    raise InputError(f"{path}: records have {name} of length {parsed[name].size} but "
                                     f"{flags[name]}={length}")
            for name in ("input_ids", "masked_lm_ids"):
                if parsed[name].size and parsed[name].max() >= vocab_size:
                    raise InputError(f"{path}: record {index} has a token id {parsed[name].max()} in {name}, "
                                     f"but the model's vocab_size is {vocab_size} (--bert_config_file): "
                                     "the data was made with another vocabulary")


def _decode(max_seq_length, max_predictions_per_seq):
    import tensorflow as tf
    spec = feature_spec(max_seq_length, max_predictions_per_seq)

    def decode(records):
        example = tf.io.parse_example(records, spec)
        return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in example.items()}
    return decode


def make_dataset(files, batch_size, max_seq_length, max_predictions_per_seq, is_training,
                 input_context=None, seed=None, start_batch=0):
    """A dataset of feature dicts with batch dimension `batch_size` (per replica when
    `input_context` is given: files, or else records, are sharded across input pipelines).
    Training with a seed: from batch `start_batch` of the seed's sequence on (the records
    before it are read and dropped unparsed)."""
    import tensorflow as tf
    if is_training:
        d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
        if input_context and input_context.num_input_pipelines > 1 and len(files) >= input_context.num_input_pipelines:
            d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            input_context = None
        d = d.repeat().shuffle(buffer_size=len(files), seed=seed)
        d = d.interleave(tf.data.TFRecordDataset, cycle_length=min(CYCLE_LENGTH, len(files)),
                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        if input_context and input_context.num_input_pipelines > 1:
            d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        d = d.shuffle(buffer_size=100, seed=seed)
        if start_batch:
            d = d.skip(start_batch * batch_size)
    else:
        d = tf.data.TFRecordDataset(files)
        if input_context and input_context.num_input_pipelines > 1:
            d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        d = d.repeat()
    d = d.batch(batch_size, drop_remainder=True)
    d = d.map(_decode(max_seq_length, max_predictions_per_seq), num_parallel_calls=tf.data.AUTOTUNE)
    return d.prefetch(tf.data.AUTOTUNE)


def one_pass_dataset(files, batch_size, max_seq_length, max_predictions_per_seq):
    """Every record of `files` once, in order, as feature dicts in batches of `batch_size`
    (the last one smaller)."""
    import tensorflow as tf
    d = tf.data.TFRecordDataset(files).batch(batch_size)
    return d.map(_decode(max_seq_length, max_predictions_per_seq), num_parallel_calls=tf.data.AUTOTUNE)

