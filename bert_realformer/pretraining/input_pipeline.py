"""Reading pretraining TFRecords with tf.data, as the original `input_fn_builder`.

Training: the files are shuffled and read interleaved (4 at once, the original's
`num_cpu_threads`, on every host alike), records shuffled with a buffer, repeated forever; the
sequence is a function of the seed only, and `start_batch` resumes it at that batch. Evaluation:
files in order, repeated (evaluation runs a fixed number of steps). Batches drop the
remainder; int64 features become int32.

Two record layouts (`RecordLayout`, recognised from the first record's features): the
original's masked records, and unmasked ones (`create_pretraining_data.py --dynamic_masking`),
masked as they are read (`pretraining.dynamic_masking`, keyed by the example's position in the
training stream, or its index in the files for evaluation). Either may lack
`next_sentence_labels` only when made for MLM-only training.
"""

import dataclasses

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.file_patterns import expand_file_patterns
from bert_realformer.pretraining.dynamic_masking import DynamicMasking, apply_masks
from bert_realformer.pretraining.records import feature_spec, unmasked_feature_spec


@dataclasses.dataclass(frozen=True)
class RecordLayout:
    """Which features the records hold: `unmasked` (dynamic masking: `word_ids`, no
    `masked_lm_*`) and whether they have `next_sentence_labels`."""
    unmasked: bool = False
    next_sentence: bool = True

    def describe(self):
        return "unmasked (dynamic_masking)" if self.unmasked else "masked"


STATIC = RecordLayout()

CYCLE_LENGTH = 4  # files read at once in training (the original's num_cpu_threads default)


def expand_input_files(spec, option="input_file"):
    """Comma-separated globs -> sorted files; one-line errors for no match or empty files."""
    files = expand_file_patterns(spec, option)
    for path in files:
        if storage.size(path) == 0:
            raise InputError(f"{option}: {path} is empty", options=(option,))
    return files


def _layout_of(path, record):
    import tensorflow as tf
    names = set(tf.train.Example.FromString(record).features.feature)
    if "input_ids" not in names or not names & {"masked_lm_positions", "word_ids"}:
        found = ", ".join(sorted(names))
        raise InputError(f"{path}: records are not pretraining examples "
                         f"(expected input_ids, masked_lm_positions or word_ids, ...; found {found})")
    return RecordLayout(unmasked="masked_lm_positions" not in names,
                        next_sentence="next_sentence_labels" in names)


def check_records(files, max_seq_length, max_predictions_per_seq, vocab_size, sample=16,
                  next_sentence=True) -> RecordLayout:
    """Parses the first `sample` records of each file: their lengths must match the flags,
    their token ids must be below the config's `vocab_size` (records made with another
    vocabulary would fail mid-step on CPU and embed zeros on a GPU), every file must have one
    layout, and `next_sentence_labels` must be there when `next_sentence`. Returns the layout."""
    import tensorflow as tf
    layout = None
    for path in files:
        try:
            records = [r.numpy() for r in tf.data.TFRecordDataset(path).take(sample)]
        except tf.errors.OpError as error:
            raise InputError(f"{path}: not a readable TFRecord file ({error.message.splitlines()[0]})") from None
        if not records:
            raise InputError(f"{path}: holds no records")
        this = _layout_of(path, records[0])
        if layout is not None and this.unmasked != layout.unmasked:
            raise InputError(f"{path}: records are {this.describe()} but {files[0]}'s are {layout.describe()}; "
                             "give files of one kind", options=("dynamic_masking",))
        if next_sentence and not this.next_sentence:
            raise InputError(f"{path}: records have no next_sentence_labels (made with no_nsp): "
                             "train MLM-only with no_nsp", options=("no_nsp",))
        layout = this if layout is None or this.next_sentence else dataclasses.replace(layout, next_sentence=False)
        _check_lengths_and_ids(path, records, this, max_seq_length, max_predictions_per_seq, vocab_size)
    return layout


def _check_lengths_and_ids(path, records, layout, max_seq_length, max_predictions_per_seq, vocab_size):
    import tensorflow as tf
    expected = {"input_ids": max_seq_length}
    options = {"input_ids": "max_seq_length", "masked_lm_positions": "max_predictions_per_seq"}
    checked_ids = ["input_ids"]
    if not layout.unmasked:
        expected["masked_lm_positions"] = max_predictions_per_seq
        checked_ids.append("masked_lm_ids")
    spec = {name: tf.io.VarLenFeature(tf.int64) for name in {*expected, *checked_ids}}
    for index, record in enumerate(records):
        try:
            parsed = {k: v.values.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
        except tf.errors.OpError:
            raise InputError(f"{path}: records are not pretraining examples "
                             "(expected input_ids, masked_lm_positions, ...)") from None
        for name, length in expected.items():
            if parsed[name].size != length:
                raise InputError(f"{path}: records have {name} of length {parsed[name].size} but "
                                 f"{options[name]}={length}", options=(options[name],))
        for name in checked_ids:
            if parsed[name].size and parsed[name].max() >= vocab_size:
                raise InputError(f"{path}: record {index} has a token id {parsed[name].max()} in {name}, "
                                 f"but the model's vocab_size is {vocab_size} (bert_config_file): "
                                 "the data was made with another vocabulary", options=("bert_config_file",))


def record_layout(files) -> RecordLayout:
    """The layout of the first record of `files` (`check_records` checks every file)."""
    import tensorflow as tf
    for record in tf.data.TFRecordDataset(files[:1]).take(1):
        return _layout_of(files[0], record.numpy())
    raise InputError(f"{files[0]}: holds no records")


def _decode(max_seq_length, max_predictions_per_seq, layout, masking):
    """Parses a batch of records (with its stream keys for unmasked ones) into int32 features,
    masked by `masking` when the records are unmasked (left unmasked, without `masked_lm_*`,
    when `masking` is None)."""
    import tensorflow as tf
    if layout.unmasked:
        spec = unmasked_feature_spec(max_seq_length, layout.next_sentence)
    else:
        spec = feature_spec(max_seq_length, max_predictions_per_seq)
        if not layout.next_sentence:
            del spec["next_sentence_labels"]

    def parse(records):
        example = tf.io.parse_example(records, spec)
        return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in example.items()}

    if not layout.unmasked:
        return parse

    def parse_and_mask(keys, records):
        features = parse(records)
        if masking is None:
            return {k: v for k, v in features.items() if k not in ("word_ids", "mask_token_id")}
        return apply_masks(features, keys, masking)
    return parse_and_mask


def make_dataset(files, batch_size, max_seq_length, max_predictions_per_seq, is_training,
                 input_context=None, seed=None, start_batch=0, layout: RecordLayout | None = None,
                 masking: DynamicMasking | None = None):
    """A dataset of feature dicts with batch dimension `batch_size` (per replica when
    `input_context` is given: files, or else records, are sharded across input pipelines).
    Training with a seed: from batch `start_batch` of the seed's sequence on (the records
    before it are read and dropped unparsed). `layout`: the records' (default: the first
    record's); unmasked records are masked with `masking` (its evaluation seed when not
    training), keyed by stream position in training and by index in the files otherwise."""
    import tensorflow as tf
    layout = layout or record_layout(files)
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
        if layout.unmasked:
            d = d.enumerate()  # the stream position: the masks' key
        if start_batch:
            d = d.skip(start_batch * batch_size)
    else:
        d = tf.data.TFRecordDataset(files)
        if layout.unmasked:
            d = d.enumerate()  # the index in the files: the same masks at every evaluation
            masking = masking and masking.for_evaluation()
        if input_context and input_context.num_input_pipelines > 1:
            d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        d = d.repeat()
    d = d.batch(batch_size, drop_remainder=True)
    d = d.map(_decode(max_seq_length, max_predictions_per_seq, layout, masking), num_parallel_calls=tf.data.AUTOTUNE)
    return d.prefetch(tf.data.AUTOTUNE)


def one_pass_dataset(files, batch_size, max_seq_length, max_predictions_per_seq, masking=None):
    """Every record of `files` once, in order, as feature dicts in batches of `batch_size`
    (the last one smaller); unmasked records get the evaluation masks of `masking`."""
    import tensorflow as tf
    layout = record_layout(files)
    d = tf.data.TFRecordDataset(files)
    if layout.unmasked:
        d = d.enumerate()
        masking = masking and masking.for_evaluation()
    d = d.batch(batch_size)
    return d.map(_decode(max_seq_length, max_predictions_per_seq, layout, masking),
                 num_parallel_calls=tf.data.AUTOTUNE)
