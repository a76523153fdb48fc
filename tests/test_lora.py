"""LoRA: the model side against a hand computation (the merged kernel W + alpha/r A B, what
trains, a plain copy), then run_classifier.py --lora_rank end to end from the tiny pretrained
checkpoint: only the factors and the head move, what the run writes is plain (model.ckpt-N read
by a model without LoRA, the SavedModel with no factor in it, prediction in another process),
a SIGKILL resumes exactly, and the users' mistakes are one line."""

import glob
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import script_processes
from helpers.in_process import completed_in_process
from helpers.pretraining_runs import killed_after_a_save
from helpers.tiny_classifier_runs import TEXTS, TINY, classifier_flags, tf1_weights, thucnews_data

import modeling
from bert_realformer.checkpoints import load_tf1_checkpoint, save_tf1_checkpoint
from modeling.lora import count_weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = modeling.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_position_embeddings=16)


def _inputs():
    ids = np.random.default_rng(0).integers(1, 40, size=(3, 9)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    return {"input_ids": ids, "input_mask": mask, "token_type_ids": np.zeros_like(ids)}


def _adapted(rank=2, alpha=None, targets=("query", "value")):
    keras.utils.set_random_seed(1)
    model = modeling.BertClassifier(CONFIG, num_labels=3)
    plain_logits = keras.ops.convert_to_numpy(model(_inputs()))
    modeling.enable_lora(model, rank, alpha, targets)
    return model, plain_logits


def _move_factors(model):
    rng = np.random.default_rng(2)
    for layer in modeling.lora.adapted_layers(model):
        layer.lora_kernel_b.assign(rng.normal(0, 0.3, layer.lora_kernel_b.shape).astype("float32"))


def test_an_adapted_model_starts_as_the_plain_one_and_trains_only_the_factors_and_the_head():
    model, plain_logits = _adapted(rank=2)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(_inputs())), plain_logits)  # (B is zero)
    hidden, layers = CONFIG.hidden_size, CONFIG.num_hidden_layers
    factors = layers * 2 * (hidden * 2 + 2 * hidden)                  # query and value: A [H, 2], B [2, H]
    head = hidden * 3 + 3                                              # output_weights, output_bias
    assert count_weights(model.trainable_variables) == factors + head
    names = {variable.path.split("/")[-1] for variable in model.trainable_variables}
    assert names == {"lora_kernel_a", "lora_kernel_b", "output_weights", "output_bias"}


def test_checkpoints_see_the_merged_kernel_and_a_plain_model_reads_them(tmp_path):
    """The TF1 name of an adapted kernel reads W + alpha/r A B (here alpha 6, r 2: a scale of 3);
    a model without LoRA loads the checkpoint and gives the adapted model's logits; loading a
    kernel into an adapted layer sets W and zeroes B; `without_lora` is the same function with
    plain dense layers."""
    model, _ = _adapted(rank=2, alpha=6)
    _move_factors(model)
    query = model.bert.encoder.blocks[1].attention.query
    merged = modeling.tf1_variable_map(model)["bert/encoder/layer_1/attention/self/query/kernel"]
    by_hand = query._kernel.numpy() + 3.0 * query.lora_kernel_a.numpy() @ query.lora_kernel_b.numpy()
    np.testing.assert_allclose(merged.numpy(), by_hand, atol=1e-6)
    logits = keras.ops.convert_to_numpy(model(_inputs()))
    save_tf1_checkpoint(model, str(tmp_path / "model.ckpt-1"))
    plain = modeling.BertClassifier(CONFIG, num_labels=3)
    report = load_tf1_checkpoint(plain, str(tmp_path / "model.ckpt-1"))
    assert not report.missing and not report.unexpected
    np.testing.assert_allclose(keras.ops.convert_to_numpy(plain(_inputs())), logits, atol=1e-5)
    copy = modeling.without_lora(model)
    assert not modeling.lora.adapted_layers(copy) and not any("lora" in v.path for v in copy.weights)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(copy(_inputs())), logits, atol=1e-5)
    load_tf1_checkpoint(model, str(tmp_path / "model.ckpt-1"))  # (into the adapted model: W merged, B zero)
    assert not query.lora_kernel_b.numpy().any()
    np.testing.assert_allclose(query._kernel.numpy(), by_hand, atol=1e-6)


def test_the_training_state_keeps_the_factors_apart():
    model, _ = _adapted(rank=2, targets=("key",))
    named = modeling.weight_variables(model)
    prefix = "bert/encoder/layer_0/attention/self/key/kernel"
    assert prefix not in named
    assert [named[f"{prefix}/{part}"].shape for part in ("lora_base", "lora_a", "lora_b")] == [(16, 16), (16, 2),
                                                                                                (2, 16)]
    assert "bert/encoder/layer_0/attention/self/query/kernel" in named


@pytest.mark.parametrize("call,said", [
    (lambda m: modeling.enable_lora(m, 2, targets=("queries",)), "LoRA targets ['queries']: expected some of query"),
    (lambda m: modeling.enable_lora(m, 0), "a LoRA rank is a positive integer, not 0"),
])
def test_a_mistaken_lora_is_refused(call, said):
    with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")):
        call(modeling.BertClassifier(CONFIG, num_labels=2))


@pytest.mark.slow
def test_a_lora_run_moves_only_the_factors_and_the_head_and_writes_plaintf1_weights(tmp_path):
    """Every pretrained weight but the query and value kernels is as the checkpoint had it; those
    and the head moved. The SavedModel holds no factor and scores as the run predicted; a second
    process with no LoRA flag predicts the test set identically, from the run's directory (its
    training state, the factors merged as it is read) and from its model.ckpt-N."""
    data, out = thucnews_data(tmp_path, ["good", "bad"] * 12), tmp_path / "out"
    train = [sys.executable, os.path.join(ROOT, "run_classifier.py"), *classifier_flags(
        data, out, "--do_train", "--do_predict", "--train_batch_size=4", "--num_train_epochs=2",
        "--learning_rate=1e-2", "--lora_rank=4", "--lora_alpha=8", f"--export_dir={tmp_path}/export")]
    result = script_processes.run(train, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "LoRA rank 4 (alpha 8) on query, value in 3 layers" in result.stderr
    before, after = tf1_weights(f"{TINY}/bert_model.ckpt"), tf1_weights(out / "model.ckpt-12")
    for name, value in after.items():
        if name.startswith("output_"):
            continue
        if name.endswith(("query/kernel", "value/kernel")):
            assert np.abs(value - before[name]).max() > 1e-3, name
        else:
            np.testing.assert_array_equal(value, before[name], err_msg=name)
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
    version = glob.glob(str(tmp_path / "export" / "*"))[0]
    stored = tf.train.list_variables(os.path.join(version, "variables", "variables"))
    assert any("query" in name for name, _ in stored) and not [name for name, _ in stored if "lora" in name]
    served = tf.saved_model.load(version)
    predicted = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    scores = served.signatures["classify"](text_a=tf.constant(TEXTS[:2]))["probabilities"].numpy()
    np.testing.assert_allclose(scores, predicted[:2], atol=1e-5)
    in_place = script_processes.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), *classifier_flags(
        data, out, "--do_predict")], capture_output=True, text=True, timeout=600)  # (its training state, merged)
    assert in_place.returncode == 0, in_place.stderr[-3000:]
    np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv", delimiter="\t"), predicted, atol=1e-6)
    again = tmp_path / "again"
    result = completed_in_process("run_classifier.py", *classifier_flags(data, again, "--do_predict",
                                                               f"--init_checkpoint={out}/model.ckpt-12"))
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.loadtxt(again / "test_results.tsv", delimiter="\t"), predicted, atol=1e-6)


@pytest.mark.slow
def test_a_killed_lora_run_resumes_exactly_and_only_with_its_own_lora(tmp_path):
    data = thucnews_data(tmp_path, ["good", "bad"] * 12)

    def command(out, *more):
        return [sys.executable, os.path.join(ROOT, "run_classifier.py"), *classifier_flags(
            data, out, "--do_train", "--train_batch_size=2", "--num_train_epochs=2", "--learning_rate=1e-2",
            "--save_checkpoints_steps=6", "--iterations_per_loop=3", "--lora_rank=2",
            "--lora_targets=value,intermediate", "--ema_decay=0.9", *more)]

    whole = script_processes.run(command(tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    killed = tmp_path / "killed"
    assert killed_after_a_save(command(killed), killed / "training_state", at_least=6) >= 6
    other = script_processes.run(command(killed, "--lora_rank=3"), capture_output=True, text=True, timeout=600)
    assert other.returncode == 2
    assert other.stderr.strip().splitlines()[-1] == (
        f"error: --output_dir={killed} holds a run started with LoRA rank 2 (alpha 2) on value, intermediate: "
        "resume it with the same --lora_rank, --lora_alpha and --lora_targets, or start a new --output_dir")
    resumed = script_processes.run(command(killed), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    expected, got = tf1_weights(tmp_path / "whole" / "model.ckpt-24"), tf1_weights(killed / "model.ckpt-24")
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("flags,said", [
    (["--lora_rank=2", "--layerwise_lr_decay=0.8"], "--lora_rank trains low-rank factors of frozen layers: it takes "
                                                    "neither --layerwise_lr_decay nor --reinit_top_layers"),
    (["--lora_rank=2", "--lora_targets=query,queries"], "--lora_targets=query,queries: expected distinct names "
     "among query, key, value, attention_output, intermediate, output"),
    (["--lora_alpha=16"], "--lora_alpha=16.0 is LoRA's: it needs --lora_rank=R"),
    (["--lora_targets=query,key"], "--lora_targets=query,key is LoRA's: it needs --lora_rank=R"),
], ids=["with-layerwise", "unknown-target", "alpha-without-rank", "targets-without-rank"])
def test_a_mistaken_lora_flag_is_one_line(tmp_path, flags, said):
    data = thucnews_data(tmp_path, ["good", "bad"])
    result = completed_in_process("run_classifier.py", *classifier_flags(data, tmp_path / "out", "--do_train", *flags))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: {said}"
