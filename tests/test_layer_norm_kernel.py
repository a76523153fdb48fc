"""oneDNN's LayerNorm in CPU prediction (`inference.layer_norm_kernel`): the kernel against the
formula in NumPy, the branch taken by the rows, float and int8 predictions equal to the model's
own ops for every variant with the kernel really in the traced step, and nothing swapped where
it does not run or does not apply; the int8 export with the kernel, the float export without."""

import keras
import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.inference import layer_norm_kernel
from bert_realformer.inference.engines import make_engine
from bert_realformer.inference.export import ClassifierServing, ServedText, export_classifier
from bert_realformer.inference.layer_norm_kernel import MIN_ROWS, LayerNormKernels
from bert_realformer.inference.predictor import Predictor


def _numpy_layer_norm(x, gamma, beta, epsilon):
    """The formula in float64: each row's mean and (two-pass) variance, epsilon inside the root."""
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def test_the_kernel_computes_the_layer_norm_formula():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 700, 24)) * 3 + 5).astype(np.float32)  # (rows far from mean 0)
    gamma, beta = rng.standard_normal(24).astype(np.float32), rng.standard_normal(24).astype(np.float32)
    got = tf.function(layer_norm_kernel.normalized)(x, gamma, beta, 1e-12)
    assert got.shape == x.shape
    np.testing.assert_allclose(np.asarray(got), _numpy_layer_norm(x, gamma, beta, 1e-12), atol=1e-5)
    assert layer_norm_kernel.kernel_runs()


def test_many_rows_take_the_kernel_and_few_the_model_ops(monkeypatch):
    monkeypatch.setattr(layer_norm_kernel, "normalized", lambda x, gamma, beta, epsilon: tf.fill(tf.shape(x), 7.0))
    layer = modeling.LayerNorm()
    layer.build((None, 8))
    call = tf.function(lambda x: layer_norm_kernel._call(layer, x), autograph=False)
    few = np.random.default_rng(1).standard_normal((1, MIN_ROWS - 1, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(call(few)), _numpy_layer_norm(few, 1.0, 0.0, layer.epsilon), atol=1e-5)
    many = np.zeros((2, MIN_ROWS // 2, 8), np.float32)  # (the rows of every leading axis count)
    np.testing.assert_array_equal(np.asarray(call(many)), np.full(many.shape, 7.0))


def _op_count(graph_def, op_type):
    """The ops of `op_type` in a graph and its functions (a cond's branches, a called function)."""
    nodes = [*graph_def.node, *(node for function in graph_def.library.function for node in function.node_def)]
    return sum(node.op == op_type for node in nodes)


def _traced_op_count(predictor, op_type):
    """The ops of `op_type` in the predictor's traced step."""
    return _op_count(next(iter(predictor._steps.values())).get_concrete_function().graph.as_graph_def(), op_type)


def _logits(model, batch):
    return {"logits": model(batch, training=False)}


def test_predictions_with_the_kernel_equal_the_model_ops_for_every_variant_in_float_and_int8():
    """A batch of 40 x 16 tokens (past MIN_ROWS): the kernel normalizes every LayerNorm of the
    step (post-LN: the embeddings' and two a block; pre-LN: one more, the final one), the
    outputs equal those of the model's ops (float32 round-off; int8: its rounding of the
    normalized values may flip), and the layers' own calls are back after tracing."""
    rng = np.random.default_rng(2)
    ids = rng.integers(1, 50, (40, 16))
    mask = np.ones_like(ids)
    mask[5:, 12:] = 0
    dataset = tf.data.Dataset.from_tensor_slices(
        {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}).batch(40)
    assert 40 * 16 >= MIN_ROWS
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    for layer_norm_type, residual, norms in (("post", "none", 5), ("pre", "none", 6), ("post", "sum", 5)):
        config = modeling.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=16,
                                     layer_norm_type=layer_norm_type, residual_attention=residual)
        keras.utils.set_random_seed(3)
        model = modeling.BertClassifier(config, num_labels=3)
        model({"input_ids": ids[:1], "input_mask": mask[:1], "segment_ids": np.zeros_like(ids[:1])})
        for int8, bound in ((False, 1e-5), (True, 5e-3)):
            engine = "int8" if int8 else "graph"
            kernel, own_ops = (Predictor(strategy, model, engine, cpu_kernels=fused) for fused in (True, False))
            got, want = (p.predict(dataset, _logits)["logits"] for p in (kernel, own_ops))
            assert np.abs(got - want).max() < bound, (layer_norm_type, residual, int8)
            assert (_traced_op_count(kernel, "_MklLayerNorm") == norms
                    and _traced_op_count(own_ops, "_MklLayerNorm") == 0)
            assert not any("call" in vars(layer) for layer in model._flatten_layers())


def test_nothing_is_swapped_where_the_kernel_does_not_run_or_does_not_apply(monkeypatch):
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=16)
    model = modeling.BertClassifier(config, num_labels=2)
    ids = np.ones((1, 4), np.int32)
    model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
    assert len(LayerNormKernels(model).layers) == 3
    cpu = tf.distribute.get_strategy()
    assert Predictor(cpu, model).engine.layer_norms and Predictor(cpu, model, "int8").engine.layer_norms
    for predictor in (Predictor(tf.distribute.OneDeviceStrategy("/gpu:0"), model), Predictor(cpu, model, "xla"),
                      Predictor(cpu, model, "tflite"), Predictor(cpu, model, cpu_kernels=False)):
        assert predictor.engine.layer_norms is None
    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # (its LayerNorms compute in bf16)
    try:
        assert LayerNormKernels(modeling.BertClassifier(config, num_labels=2)).layers == []
    finally:
        keras.mixed_precision.set_global_policy("float32")

    def missing(op_type, **attributes):
        raise tf.errors.NotFoundError(None, None, f"No registered '{op_type}' OpKernel for 'CPU' devices")
    monkeypatch.setattr(layer_norm_kernel, "apply_op", missing)
    assert not layer_norm_kernel.kernel_runs.__wrapped__()
    monkeypatch.setattr(layer_norm_kernel, "kernel_runs", lambda: False)
    assert LayerNormKernels(model).layers == []


def _saved_op_count(export_path, op_type):
    """The ops of `op_type` in a SavedModel's graph and its functions."""
    from tensorflow.core.protobuf import saved_model_pb2
    saved = saved_model_pb2.SavedModel.FromString(tf.io.gfile.GFile(f"{export_path}/saved_model.pb", "rb").read())
    return _op_count(saved.meta_graphs[0].graph_def, op_type)


def test_the_int8_export_normalizes_many_rows_by_the_kernel_and_the_float_export_by_the_model_ops(
        tmp_path, monkeypatch):
    """An int8 SavedModel (which needs oneDNN's int8 kernels anyway) holds the kernel for the
    embeddings' LayerNorm and two a block, and serves a request of 40 texts x 16 tokens (past
    MIN_ROWS) as an int8 export with the model's ops does; a float export holds none (any
    TensorFlow serves it)."""
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    words = [f"w{i}" for i in range(40)]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{token}\n" for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]))
    config = modeling.BertConfig(vocab_size=45, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=16)
    keras.utils.set_random_seed(5)
    model = modeling.BertClassifier(config, num_labels=3)
    model.build()
    rng = np.random.default_rng(6)
    texts = tf.constant([" ".join(rng.choice(words, 14)) for _ in range(40)])  # ([CLS] + 14 + [SEP])
    assert 40 * 16 >= MIN_ROWS

    def served(name):
        path = export_classifier(model, ServedText(str(vocab), True, 16), ["a", "b", "c"], str(tmp_path / name),
                                 engine=make_engine("int8", model))
        return path, tf.saved_model.load(path).signatures["classify"](text_a=texts)["probabilities"].numpy()
    kernel_path, kernel = served("kernel")
    monkeypatch.setattr(layer_norm_kernel, "kernel_runs", lambda: False)
    ops_path, own_ops = served("ops")
    assert _saved_op_count(kernel_path, "_MklLayerNorm") == 5 and _saved_op_count(ops_path, "_MklLayerNorm") == 0
    assert np.abs(kernel - own_ops).max() < 5e-3
    assert not any("call" in vars(layer) for layer in model._flatten_layers())
    monkeypatch.undo()
    float_serving = ClassifierServing(model, ServedText(str(vocab), True, 16), ["a", "b", "c"])
    assert _op_count(float_serving.model_outputs.get_concrete_function().graph.as_graph_def(), "_MklLayerNorm") == 0
