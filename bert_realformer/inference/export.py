"""SavedModel exports that take raw text: a fine-tuned classifier, or the encoder.

The vocabulary's tokenizer runs inside the graph (`tokenization.vocabularies.graph_tokenizer_for`:
WordPiece's `tokenization.fast`, or SentencePiece's op, each with the ids of the tokenizer the
run used); loading needs `import tensorflow_text` (it registers the ops). Signatures:
  classifier: `serving_default` / `classify`: text_a [B] string -> probabilities [B, C]
    (a regression model, one output: scores [B, 1]; a multi-label one: each label's sigmoid
    probability [B, C] and `predicted` [B, C], 1 where it reaches the label's threshold);
    `classify_pair`: text_a, text_b -> the same;
  encoder: `serving_default` / `encode` and `encode_pair` -> sequence_output, pooled_output;
    `embed`: text_a -> a sentence embedding [B, H] (`embedding`: the mean of the last layer over
    the real tokens, `modeling.sentence_embedding`; `normalized`: the same over its L2 norm).
The directory layout is TF Serving's: EXPORT_DIR/<version>/saved_model.pb, version = seconds
since the epoch. Written under a temporary name and renamed.

Each request is padded to its longest sequence (rounded up to a multiple of 8, at most
max_seq_length), not to max_seq_length: short texts cost what their tokens cost. A classifier
exported with `doc_stride` takes texts of any length: text_a is cut into overlapping windows
as run_classifier.py --doc_stride cuts it, and a text's windows are combined into one row the
same way (`window_pooling`). The prediction engine an export is given (`inference.engines`)
decides what it holds besides the model: the int8 engine's quantized kernels (serving them needs a
TensorFlow with oneDNN's kernels, as the run did), a TensorFlow Lite engine's model.tflite; the
graph's export keeps the model's own ops, which any TensorFlow serves.

A classifier's model.tflite (EXPORT_DIR/<version>/model.tflite) is the model on packed sequences
for TensorFlow Lite runtimes (signature `serving_default`: input_ids, input_mask, token_type_ids
int32 [B, T] -> the outputs above but `label`, one row per sequence; tokenizing and packing, and
pooling a long text's windows, are the caller's), in the engine's precision (float32, or
dynamic-range int8), with the vocabulary (vocab.txt, or spiece.model) and label_list.txt (the
outputs' order) beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import TYPE_CHECKING

import tensorflow as tf

import modeling
from bert_realformer import storage
from bert_realformer.checkpoints.training_states import named_variables
from bert_realformer.errors import InputError, sigterm_deferred, stop_if_terminated
from bert_realformer.inference.engines import GraphEngine
from bert_realformer.inference.padding import padded_length
from modeling.layers import l2_normalized
from tokenization.vocabularies import graph_tokenizer_for, vocabulary_kind

if TYPE_CHECKING:  # annotations only
    import keras


def _keep(ids, lengths, truncation="head"):
    """`lengths[i]` ids of each row of a ragged [B, (n)] tensor, chosen as `sequences.kept`
    chooses them: the first (`head`), the last (`tail`), or the first k // 4 and the last
    k - k // 4 (`head_tail`)."""
    # (on the flat ids, each with its row's numbers: ragged broadcasting traces many assertions)
    rows = ids.value_rowids()
    positions = tf.ragged.range(ids.row_lengths()).flat_values
    kept = tf.gather(lengths, rows)
    if truncation == "head":
        keep = positions < kept
    else:
        head = kept // 4 if truncation == "head_tail" else tf.zeros_like(kept)
        tail_start = tf.gather(ids.row_lengths(), rows) - (kept - head)
        keep = (positions < head) | (positions >= tail_start)
    return tf.RaggedTensor.from_value_rowids(tf.boolean_mask(ids.flat_values, keep), tf.boolean_mask(rows, keep),
                                             nrows=ids.nrows(), validate=False)


def pack_inputs(ids_a, ids_b, max_seq_length, cls_id, sep_id, truncation="head"):
    """Ragged ids -> dense `input_ids`, `input_mask`, `token_type_ids` [B, max_seq_length], with
    the original's truncation: pop from the end of the longer text (B on ties) until they fit.
    In closed form: B keeps min(len_b, max(m // 2, m - len_a)) and A keeps what remains, m the
    room left by [CLS] and the [SEP]s. Which tokens each text keeps: `truncation`
    (`sequences.kept`)."""
    batch = ids_a.nrows()
    cls = tf.fill([batch, 1], tf.constant(cls_id, tf.int64))
    sep = tf.fill([batch, 1], tf.constant(sep_id, tf.int64))
    len_a = ids_a.row_lengths()
    if ids_b is None:
        a = _keep(ids_a, tf.minimum(len_a, tf.constant(max_seq_length - 2, tf.int64)), truncation)
        ids = tf.concat([cls, a, sep], axis=1)
        types = tf.zeros_like(ids)
    else:
        room = tf.constant(max_seq_length - 3, tf.int64)
        len_b = ids_b.row_lengths()
        keep_b = tf.minimum(len_b, tf.maximum(room // 2, room - len_a))
        keep_a = tf.minimum(len_a, room - keep_b)
        a, b = _keep(ids_a, keep_a, truncation), _keep(ids_b, keep_b, truncation)
        first = tf.concat([cls, a, sep], axis=1)
        second = tf.concat([b, sep], axis=1)
        ids = tf.concat([first, second], axis=1)
        types = tf.concat([tf.zeros_like(first), tf.ones_like(second)], axis=1)
    shape = tf.stack([ids.nrows(), padded_length(ids.row_lengths(), max_seq_length)])
    return {"input_ids": tf.cast(ids.to_tensor(0, shape=shape), tf.int32),
            "input_mask": tf.cast(tf.ones_like(ids).to_tensor(0, shape=shape), tf.int32),
            "token_type_ids": tf.cast(types.to_tensor(0, shape=shape), tf.int32)}


@dataclasses.dataclass(frozen=True)
class ServedText:
    """How an export reads the raw text it is sent: the tokenizer (`vocab_file`,
    `do_lower_case`), the longest sequence (`max_seq_length`), which tokens a text too long keeps
    (`truncation`: `sequences.kept`), and for a classifier long texts in windows of `doc_stride`
    whose outputs are pooled by `window_pooling` (`mean` or `max`)."""
    vocab_file: str
    do_lower_case: bool = True
    max_seq_length: int = 128
    truncation: str = "head"
    doc_stride: int | None = None
    window_pooling: str = "mean"


def _features_spec():
    """Packed features [B, S] as `pack_inputs` makes them: what the model's own function takes."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name)
            for name in ("input_ids", "input_mask", "token_type_ids")}


class TextServing(tf.Module):
    """Raw text -> the vocabulary's graph tokenizer -> packed features -> `outputs(features)`.

    The model runs in one function of its own (`model_outputs`, traced once for packed features
    of any batch and length), which every signature calls: the model is traced and stored once,
    however many signatures the export has."""

    def __init__(self, model: keras.Model, text: ServedText, engine: GraphEngine | None = None):
        super().__init__()
        self._model = model
        self._truncation = text.truncation
        self.model_variables = named_variables(model)  # tracked, so the SavedModel holds them
        self.engine = engine or GraphEngine(model)
        self.engine_variables = self.engine.serving_variables()
        self._within = self.engine.serving_within()
        self._tokenizer = graph_tokenizer_for(text.vocab_file, do_lower_case=text.do_lower_case)
        self.tokenizer_resource = self._tokenizer.resource  # (tracked: the SavedModel holds the op's model)
        self._max_seq_length = text.max_seq_length
        self._cls = self._tokenizer.vocab[self._tokenizer.cls_token]
        self._sep = self._tokenizer.vocab[self._tokenizer.sep_token]

    def outputs(self, features):
        raise NotImplementedError

    def forward(self, features):
        """What the model gives for packed `features`: a tensor or a dict of tensors."""
        raise NotImplementedError

    @tf.function(input_signature=[_features_spec()], autograph=False)
    def model_outputs(self, features):
        with contextlib.ExitStack() as kernels:
            for within in self._within:
                kernels.enter_context(within())
            return self.forward(features)

    def texts_outputs(self, ids_a, ids_b):
        """Token ids (ragged [B, (n)]; `ids_b` None for single texts) -> the outputs."""
        return self.outputs(pack_inputs(ids_a, ids_b, self._max_seq_length, self._cls, self._sep, self._truncation))

    # (without AutoGraph: nothing here branches on a tensor, and tracing is a third faster)
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a")], autograph=False)
    def serve(self, text_a):
        return self.texts_outputs(self._tokenizer.tokenize(text_a), None)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")], autograph=False)
    def serve_pair(self, text_a, text_b):
        return self.texts_outputs(self._tokenizer.tokenize(text_a), self._tokenizer.tokenize(text_b))


class ClassifierServing(TextServing):
    """A `BertClassifier`: {probabilities [B, C], label [B] (the most probable label's name)},
    or {scores [B, 1]} for regression (`label_list` None). With `doc_stride`, long texts are
    cut into windows whose outputs are combined per text (`window_pooling`: max or mean; `first`
    reads the first window alone, which is head truncation; `auto` left unchosen is max); without
    it, a text too long is cut as `truncation` says. With `thresholds` (one per label) it is a
    multi-label classifier: {probabilities [B, C] (sigmoids), predicted [B, C] (0/1)}."""

    def __init__(self, model: keras.Model, text: ServedText, label_list: list[str] | None,
                 thresholds: list[float] | None = None, engine: GraphEngine | None = None):
        super().__init__(model, text, engine)
        self._regression = label_list is None
        self._thresholds = None if thresholds is None else tf.constant(thresholds, tf.float32)
        self.labels = tf.constant(label_list or ["score"])
        self._doc_stride = text.doc_stride
        self._window_pooling = text.window_pooling

    def outputs(self, features):
        return self._named(self._logits(features))

    def forward(self, features):
        """[B, C] logits (scores for regression) of packed features."""
        return tf.cast(self._model(features, training=False), tf.float32)

    def _logits(self, features):
        return self.model_outputs(features)

    def _named(self, logits):
        if self._regression:
            return {"scores": logits}
        if self._thresholds is not None:
            probabilities = tf.sigmoid(logits)
            return {"probabilities": probabilities,
                    "predicted": tf.cast(probabilities >= self._thresholds[None, :], tf.int32)}
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities, "label": tf.gather(self.labels, tf.argmax(probabilities, axis=-1))}

    def texts_outputs(self, ids_a, ids_b):
        """Without `doc_stride`, the original truncation; with it, the logits of every window
        of text_a (with text_b, cut to half the room when the pair does not fit), pooled per
        text as `classification.windows.WindowOutputs.combined` pools them."""
        if not self._doc_stride:
            return super().texts_outputs(ids_a, ids_b)
        room = self._max_seq_length - 2 if ids_b is None else self._max_seq_length - 3
        if ids_b is not None:
            too_long = ids_a.row_lengths() + ids_b.row_lengths() > room
            keep_b = tf.where(too_long, tf.minimum(ids_b.row_lengths(), tf.maximum(
                tf.constant(room // 2, tf.int64), room - ids_a.row_lengths())), ids_b.row_lengths())
            ids_b = _keep(ids_b, keep_b)
            room_a = room - ids_b.row_lengths()
        else:
            room_a = tf.fill([ids_a.nrows()], tf.constant(room, tf.int64))
        windows, document = _windows_of(ids_a, room_a, tf.constant(self._doc_stride, tf.int64))
        pair = None if ids_b is None else tf.gather(ids_b, document)
        logits = self._logits(pack_inputs(windows, pair, self._max_seq_length, self._cls, self._sep))
        pool = tf.math.segment_max if self._window_pooling == "max" else tf.math.segment_mean
        return self._named(pool(logits, document))


def _windows_of(ids, room, stride):
    """Ragged ids [B, (n)] and each text's room [B] -> (windows [W, (<= room)], the text of
    each window [W]): the windows of `sequences.window_starts` (one per text that fits), in
    text order."""
    lengths = ids.row_lengths()
    stride = tf.minimum(room, stride)  # (as window_starts: never past a window's end)
    counts = 1 + tf.maximum(lengths - room + stride - 1, 0) // stride
    document = tf.repeat(tf.range(ids.nrows()), counts)
    starts = tf.ragged.range(counts).flat_values * tf.gather(stride, document)
    ends = tf.minimum(starts + tf.gather(room, document), tf.gather(lengths, document))
    offsets = tf.gather(ids.row_starts(), document)
    positions = tf.ragged.range(offsets + starts, offsets + ends)
    return tf.gather(ids.flat_values, positions), document


class EncoderServing(TextServing):
    """A `BertModel`: {sequence_output [B, S, H], pooled_output [B, H], input_mask [B, S]}."""

    def forward(self, features):
        out = self._model(features, training=False)
        return {"sequence_output": tf.cast(out["sequence_output"], tf.float32),
                "pooled_output": tf.cast(out["pooled_output"], tf.float32)}

    def outputs(self, features):
        return {**self.model_outputs(features), "input_mask": features["input_mask"]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a")], autograph=False)
    def embed(self, text_a):
        features = pack_inputs(self._tokenizer.tokenize(text_a), None, self._max_seq_length, self._cls, self._sep,
                               self._truncation)
        sequence = self.model_outputs(features)["sequence_output"]
        embedding = modeling.sentence_embedding(sequence, features["input_mask"])
        return {"embedding": embedding, "normalized": l2_normalized(embedding)}


def _save(module, export_dir, signatures, extra_files=None):
    """Writes EXPORT_DIR/<version> (seconds since the epoch) atomically, `signatures` ({name:
    the module's function}) and `extra_files` ({name: bytes}) beside the SavedModel; returns its
    path."""
    version = str(int(time.time()))
    path = os.path.join(export_dir, version)
    tmp = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}")
    storage.makedirs(export_dir)
    moving = False
    try:
        with sigterm_deferred():  # (its tracing would print the traceback of a stop met inside it)
            tf.saved_model.save(module, tmp, signatures=signatures)
        for name, data in (extra_files or {}).items():  # (inside the temporary version: plain writes)
            with storage.open_file(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        # A SIGTERM that reached Python inside the save (in a `__del__`, where it is lost) is
        # raised here, before anything has the version's name.
        stop_if_terminated()
        moving = True
        storage.rmtree(path)
        storage.move_tree(tmp, path, last=("saved_model.pb",))
    except BaseException:
        storage.rmtree(tmp)
        if moving:  # (a version without saved_model.pb, which no server loads: not left behind)
            storage.rmtree(path)
        raise
    return path


def _plain(model, engine):
    """The model and engine a SavedModel holds: a LoRA-adapted model as plain dense layers of
    its merged kernels (`modeling.without_lora`) under a graph engine of its own; an engine with
    kernels or files of its own keeps its model (they are made from the merged kernels)."""
    if engine is not None and type(engine) is not GraphEngine:
        return model, engine
    plain = modeling.without_lora(model)
    if plain is model:
        return model, engine
    return plain, GraphEngine(plain, cpu_kernels=engine.cpu_kernels if engine is not None else False)


def export_classifier(model: keras.Model, text: ServedText, label_list: list[str] | None, export_dir: str,
                      thresholds: list[float] | None = None, engine: GraphEngine | None = None) -> str:
    """Signatures `serving_default`/`classify` (text_a) and `classify_pair` (text_a, text_b), the
    text read as `text` says; `thresholds`: a multi-label classifier's, one per label; `engine`:
    the prediction engine whose kernels or files the export holds (None: the graph's)."""
    model, engine = _plain(model, engine)
    module = ClassifierServing(model, text, label_list, thresholds, engine)

    def outputs(features):  # (the numeric outputs of packed features)
        named = module._named(module.forward(features))
        return {name: value for name, value in named.items() if value.dtype != tf.string}
    files = module.engine.serving_files(outputs, _features_spec())
    if files:  # (what reads them needs the vocabulary, and the labels in the order of the outputs)
        name = "spiece.model" if vocabulary_kind(text.vocab_file) == "sentencepiece" else "vocab.txt"
        files[name] = storage.read_bytes(text.vocab_file)
        if label_list is not None:
            files["label_list.txt"] = "".join(f"{label}\n" for label in label_list).encode("utf-8")
    return _save(module, export_dir, {"serving_default": module.serve, "classify": module.serve,
                                      "classify_pair": module.serve_pair}, files)


def export_encoder(model: keras.Model, text: ServedText, export_dir: str, engine: GraphEngine | None = None) -> str:
    """Signatures `serving_default`/`encode` (text_a) and `encode_pair` (text_a, text_b), and
    `embed` (text_a: a sentence embedding)."""
    model, engine = _plain(model, engine)
    module = EncoderServing(model, text, engine)
    return _save(module, export_dir, {"serving_default": module.serve, "encode": module.serve,
                                      "encode_pair": module.serve_pair, "embed": module.embed})


def export_model(model: keras.Model, text: ServedText, export_dir: str, label_list: list[str] | None = None,
                 thresholds: list[float] | None = None, engine: GraphEngine | None = None) -> str:
    """What a checkpoint serves, by its model: a `BertClassifier` as `export_classifier` (its
    labels named by `label_list`, a fine-tuning run's order; '0'..'C-1' without one; a regression
    model's score; a multi-label classifier with its `thresholds`), any other model as its
    encoder (`export_encoder`); `engine`: the prediction engine whose kernels or files the export
    holds. Returns the version's path."""
    if not isinstance(model, modeling.BertClassifier):
        encoder = model if isinstance(model, modeling.BertModel) else model.bert
        return export_encoder(encoder, text, export_dir, engine)
    if model.num_labels == 1:
        label_list = None
    elif label_list is None:
        label_list = [str(i) for i in range(model.num_labels)]
    elif len(label_list) != model.num_labels:
        raise InputError(f"label_list.txt names {len(label_list)} labels but the classifier has "
                         f"{model.num_labels} outputs")
    return export_classifier(model, text, label_list, export_dir, thresholds, engine)
