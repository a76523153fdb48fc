"""run_pretraining.py end to end: training, eval, TF1 export, resume after SIGKILL, bad input."""

import json
import os
import shutil
import sys

import numpy as np
import pytest
from helpers.pretraining_runs import (
    DATA,
    RECORDS,
    ROOT,
    TINY,
    assert_same_run,
    command,
    eval_results,
    finished,
    free_ports,
    killed_after_a_save,
    loopback_workers,
    run,
    run_here,
    step_losses,
    uninterrupted_run,
)

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config

pytestmark = pytest.mark.slow  # the scripts end to end (in subprocesses where a test is about a process)



def test_train_eval_and_tf1_export(tmp_path):
    result = run_here(command(tmp_path, "--do_train", "--do_eval", "--num_train_steps=12",
                         "--save_checkpoints_steps=6", "--iterations_per_loop=6",
                         "--max_eval_steps=4", "--gradient_accumulation_steps=2"))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "out"
    lines = (out / "eval_results.txt").read_text().splitlines()
    values = dict(line.split(" = ") for line in lines)
    assert sorted(values) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                              "next_sentence_accuracy", "next_sentence_loss"]
    assert values["global_step"] == "12"
    assert 0 <= float(values["masked_lm_accuracy"]) <= 1 and float(values["masked_lm_loss"]) > 0
    assert "step 12/12" in result.stderr and "examples/s" in result.stderr
    # The TF1 export holds every pretraining weight under its original name.
    model = modeling.BertPretrainer(modeling.BertConfig.from_dict(TINY))
    report = checkpoints.load_tf1_checkpoint(model, str(out / "model.ckpt-12"))
    assert not report.missing and not report.unexpected
    assert sorted(os.listdir(out / "training_state"))[:2] == ["checkpoint", "ckpt-12.data-00000-of-00001"]
    assert any(name.startswith("events") for name in os.listdir(out / "train"))


def test_continue_from_tf1_checkpoint_with_new_heads_listed(tmp_path):
    """The tiny original-BERT checkpoint without its cls/ heads: the heads are listed as new and
    the MLM head is fitted first on the frozen encoder (OUTPUT_DIR/head_fit), which the run then
    continues from; run again, the finished run trains nothing."""
    src = modeling.BertPretrainer(read_config(
        os.path.join(DATA, "bert_postln_tiny", "bert_config.json")))
    checkpoints.load_tf1_checkpoint(src.bert, os.path.join(DATA, "bert_postln_tiny"))
    prefix = checkpoints.save_tf1_checkpoint(src.bert, str(tmp_path / "init" / "bert_model.ckpt"))
    records = str(tmp_path / "small_vocab.tfrecord")
    made = run_here([sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
                f"--input_file={DATA}/pretraining_data/input.txt", f"--output_file={records}",
                f"--vocab_file={DATA}/bert_postln_tiny/vocab.txt", "--max_seq_length=64",
                "--max_predictions_per_seq=10", "--dupe_factor=1"])
    assert made.returncode == 0, made.stderr
    config = json.load(open(os.path.join(DATA, "bert_postln_tiny", "bert_config.json")))
    cmd = command(tmp_path, "--do_train", "--num_train_steps=3", f"--init_checkpoint={prefix}", "--head_fit_steps=2",
                  config=config, input_file=records)
    result = run_here(cmd)
    assert result.returncode == 0, result.stderr[-3000:]
    head_fit = tmp_path / "out" / "head_fit"
    assert (f"--init_checkpoint has no MLM head (cls/predictions): fitting one on the frozen encoder for 2 steps "
            f"first, into {head_fit}") in result.stderr
    assert "freshly initialised" in result.stderr and "cls/predictions/output_bias" in result.stderr
    initial = checkpoints.read_tf1_checkpoint(prefix)
    # The head fitted to the frozen encoder (its weights as released), then the whole model continued from it.
    fitted = checkpoints.read_tf1_checkpoint(str(head_fit / "model.ckpt-2"))
    assert "cls/predictions/output_bias" in fitted and np.abs(fitted["cls/predictions/output_bias"]).max() > 0
    for name, value in initial.items():
        np.testing.assert_array_equal(fitted[name], value, err_msg=name)
    assert f"weights: TF1 checkpoint {head_fit}/model.ckpt-2 (step 2), 62 loaded\n" in result.stderr
    trained = checkpoints.read_tf1_checkpoint(str(tmp_path / "out" / "model.ckpt-3"))
    # Started from the checkpoint: after 3 small steps the embeddings are still close to it.
    delta = np.abs(trained["bert/embeddings/word_embeddings"] - initial["bert/embeddings/word_embeddings"])
    assert 0 < delta.max() < 0.05
    again = run_here(cmd)  # (finished: neither the head fit nor the run trains again)
    assert again.returncode == 0 and "fitting one" not in again.stderr, again.stderr[-3000:]


def test_killed_and_resumed_run_equals_the_uninterrupted_run(tmp_path):
    """Dropout and PLD on, two micro-batches a step, the RealFormer warm start over the whole run:
    a run SIGKILLed after a checkpoint (inside the warm-up), with the next save half written, and
    restarted with the same flags resumes from the last complete save (no finished step redone)
    and ends with the weights and eval results of the run that was never interrupted: same data
    from the same position (two batches a step), same dropout and PLD draws, the same residual
    attention factor at every step."""
    flags = ["--do_train", "--do_eval", "--num_train_steps=40", "--save_checkpoints_steps=5",
             "--iterations_per_loop=5", "--keep_checkpoint_max=100", "--max_eval_steps=3", "--pld",
             "--pld_gamma=0.05", "--train_batch_size=4", "--gradient_accumulation_steps=2",
             "--residual_attention_warmup_steps=40"]
    whole_dir, killed_dir = uninterrupted_run(tmp_path, flags, "killed")

    cmd = command(killed_dir, *flags)
    state = killed_dir / "out" / "training_state"
    last = killed_after_a_save(cmd, state)
    assert 10 <= last < 40
    # A kill inside a save leaves the next state's files without the `checkpoint` file naming
    # them; make that case certain: a truncated index of the next save, and no data file.
    half_written = state / f"ckpt-{last + 5}.index"
    half_written.write_bytes((state / f"ckpt-{last}.index").read_bytes()[:40])
    for leftover in state.glob(f"ckpt-{last + 5}.data-*"):
        leftover.unlink()

    resumed = run(cmd)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {state}/ckpt-{last} at step {last}" in resumed.stderr
    assert f"carried scores weigh {last / 40:g} at step {last}, rising to 1 at step 40" in resumed.stderr
    assert f"step {last}/" not in resumed.stderr  # finished steps are not redone
    assert "step 40/40" in resumed.stderr
    assert_same_run(whole_dir, killed_dir, 40)


def _history(directory):
    return [json.loads(line) for line in (directory / "out" / "eval_history.jsonl").read_text().splitlines()]


def _as_if_killed_at(directory, step, history_steps):
    """Leaves `directory/out` as a run killed after saving the training state of `step` leaves
    it: later states, the final checkpoint and eval results gone, the eval history holding
    `history_steps` (points the killed run wrote after its last save, or not yet)."""
    state = directory / "out" / "training_state"
    kept = sorted(int(p.name[5:-6]) for p in state.glob("ckpt-*.index") if int(p.name[5:-6]) <= step)
    for path in state.glob("ckpt-*"):
        if int(path.name.split(".")[0][5:]) > step:
            path.unlink()
    (state / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{step}"\n' + "".join(
        f'all_model_checkpoint_paths: "ckpt-{s}"\n' for s in kept))
    for path in (directory / "out").glob("model.ckpt-*"):
        path.unlink()
    (directory / "out" / "eval_results.txt").unlink()
    history = directory / "out" / "eval_history.jsonl"
    history.write_text("".join(line + "\n" for line in history.read_text().splitlines()
                               if json.loads(line)["step"] in history_steps))


def test_eval_history_of_resumed_runs_has_every_point_once(tmp_path):
    """--eval_every_steps: a held-out point every 5 steps and at the last; a run killed after
    writing points past its last save, and one killed between a save and its point, resume to
    the uninterrupted run's history: no point repeated, none missing, the same numbers."""
    flags = ["--do_train", "--do_eval", "--num_train_steps=12", "--save_checkpoints_steps=5",
             "--eval_every_steps=5", f"--eval_input_file={RECORDS}", "--max_eval_steps=2", "--keep_checkpoint_max=10"]
    whole_dir = tmp_path / "whole"
    whole_dir.mkdir()
    whole = run(command(whole_dir, *flags))
    assert whole.returncode == 0, whole.stderr[-3000:]
    expected = _history(whole_dir)
    assert [p["step"] for p in expected] == [0, 5, 10, 12]  # step 0: the model the run starts from
    assert set(expected[0]) == {"step", "loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                                "next_sentence_loss"}
    final = eval_results(whole_dir / "out")
    assert abs(float(final["masked_lm_loss"]) - expected[-1]["masked_lm_loss"]) < 1e-6
    for name, step, written in (("past_save", 5, {0, 5, 10, 12}), ("before_point", 10, {0, 5})):
        directory = tmp_path / name
        shutil.copytree(whole_dir, directory)
        _as_if_killed_at(directory, step, written)
        cmd = [c.replace(str(whole_dir), str(directory)) for c in command(whole_dir, *flags)]
        resumed = run(cmd)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert f"at step {step}" in resumed.stderr
        history = _history(directory)
        assert [p["step"] for p in history] == [0, 5, 10, 12], name
        for got, want in zip(history, expected):
            for key, value in want.items():
                assert abs(got[key] - value) < 1e-6, (name, key, got, want)


def test_eval_alone_in_a_later_process_uses_the_trained_weights(tmp_path):
    """With the original's usual flags (--init_checkpoint the starting model, the training
    run's --output_dir), eval alone evaluates the trained weights and reports their step."""
    init = checkpoints.save_tf1_checkpoint(modeling.BertPretrainer(modeling.BertConfig.from_dict(TINY)),
                                        str(tmp_path / "init" / "bert_model.ckpt"))
    trained = run(command(tmp_path, "--do_train", "--do_eval", "--num_train_steps=6",
                          "--iterations_per_loop=3", "--max_eval_steps=3", f"--init_checkpoint={init}"))
    assert trained.returncode == 0, trained.stderr[-3000:]
    out = tmp_path / "out"
    first = eval_results(out)
    (out / "eval_results.txt").unlink()
    again = run(command(tmp_path, "--do_eval", "--max_eval_steps=3", f"--init_checkpoint={init}"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert eval_results(out) == first and first["global_step"] == "6"
    assert f"weights: training state {out}/training_state/ckpt-6 (step 6)" in again.stderr


def _files(directory):
    """{relative path: (size, mtime)} of every file under `directory`."""
    return {str(path.relative_to(directory)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in directory.rglob("*") if path.is_file()}


def test_resuming_with_another_layer_norm_type_or_from_a_damaged_state_is_refused(tmp_path):
    """A training state of a Post-LN run cannot silently resume as Pre-LN (its LayerNorms
    would stay random): one line naming what is missing and unexpected. Flipping
    --train_heads_only or --no_nsp (other variables train) is one line naming the flag, before
    anything is read, moved or written. A state whose data file is gone: one line naming it."""
    first = run_here(command(tmp_path, "--do_train", "--num_train_steps=2"))
    assert first.returncode == 0, first.stderr[-3000:]
    out, before = tmp_path / "out", _files(tmp_path / "out")
    for flag, was in (("--train_heads_only", "--train_heads_only=false"), ("--no_nsp", "--no_nsp=false")):
        flipped = run_here(command(tmp_path, "--do_train", "--num_train_steps=4", flag))
        assert flipped.returncode == 2, flipped.stderr[-3000:]
        assert flipped.stderr.strip().splitlines()[-1] == (
            f"error: {flag}=true: {out} holds a run made with {was} ({out}/training_options.json); run again "
            f"with {was} to go on with it, or give a new --output_dir")
        assert _files(out) == before  # nothing moved aside as damaged, nothing written
    result = run_here(command(tmp_path, "--do_train", "--num_train_steps=4", "--layer_norm_type=pre"))
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "does not match the model" in last
    assert "bert/encoder/layer_0/attention/LayerNorm/gamma" in last  # missing (Pre-LN's)
    assert "bert/encoder/layer_0/attention/output/LayerNorm/gamma" in last  # unexpected (Post-LN's)

    state = tmp_path / "out" / "training_state"
    next(state.glob("ckpt-2.data-*")).unlink()
    damaged = run_here(command(tmp_path, "--do_train", "--num_train_steps=4"))
    assert damaged.returncode == 2, damaged.stderr[-3000:]
    last = damaged.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {state}/ckpt-2: incomplete (no data shards); {state} holds no complete training")


@pytest.mark.parametrize("flags,message", [
    (["--input_file=/nonexistent/*.tfrecord"], "--input_file: /nonexistent/*.tfrecord matches no file"),
    (["--max_seq_length=32"], "records have input_ids of length 64 but --max_seq_length=32"),
    (["--max_predictions_per_seq=20"],
     "records have masked_lm_positions of length 10 but --max_predictions_per_seq=20"),
    (["--init_checkpoint=" + os.path.join(DATA, "bert_postln_tiny", "bert_model.ckpt")],
     "bert/embeddings/word_embeddings has shape [128, 32] but --bert_config_file gives it [30522, 32]"),
    (["--train_batch_size=0"], "--train_batch_size=0: must be at least 1"),
    (["--residual_attention_warmup_steps=-1"], "--residual_attention_warmup_steps=-1: must be at least 0"),
    (["--residual_attention_warmup_steps=2.5"], "--residual_attention_warmup_steps=2.5: "),
    (["--residual_attention_warmup_steps=6"], "--residual_attention_warmup_steps=6: at most --num_train_steps=5"),
    (["--residual_attention_warmup_steps=3", "--residual_attention=none"],
     "--residual_attention_warmup_steps=3: the model is post-LN, which carries no attention scores"),
])
def test_bad_input_is_one_line_before_training(tmp_path, flags, message):
    cmd = [c for c in command(tmp_path, "--do_train", "--num_train_steps=5")
           if not any(c.startswith(f.split("=")[0] + "=") for f in flags)] + flags
    result = run_here(cmd)  # (refused before any work)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last
    assert not os.path.exists(tmp_path / "out" / "training_state")


@pytest.mark.parametrize("mode", ["mean"])
def test_warm_start_begins_as_the_post_ln_checkpoint_and_writes_a_plain_realformer(tmp_path, mode):
    """A post-LN checkpoint continued as RealFormer-mean with --residual_attention_warmup_steps:
    its step-0 held-out evaluation is the post-LN run's from the same checkpoint (without the warm
    start it is not, and the run says so in one line); after the warm-up, model.ckpt-N read as a
    plain RealFormer-mean (another process) evaluates as the run's own model did."""
    post_ln = {**TINY, "residual_attention": "none"}
    source = modeling.BertPretrainer(modeling.BertConfig.from_dict(post_ln))
    rng = np.random.default_rng(0)
    for name, weight in modeling.tf1_variable_map(source).items():  # (attention and outputs far from uniform)
        if name.endswith(("query/kernel", "key/kernel", "word_embeddings")):
            weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))
    init = checkpoints.save_tf1_checkpoint(source, str(tmp_path / "released" / "bert_model.ckpt"))
    (tmp_path / "released" / "bert_config.json").write_text(json.dumps(post_ln))
    common = ["--do_train", f"--init_checkpoint={init}", f"--eval_input_file={RECORDS}", "--eval_every_steps=2",
              "--max_eval_steps=2"]
    runs = {}
    for name, config, flags in (("post-LN", post_ln, ["--num_train_steps=2"]),
                                ("warm", {**TINY, "residual_attention": mode},
                                 ["--num_train_steps=4", "--residual_attention_warmup_steps=3", "--do_eval"]),
                                ("cold", {**TINY, "residual_attention": mode}, ["--num_train_steps=2"])):
        (tmp_path / name).mkdir()
        result = run_here(command(tmp_path / name, *common, *flags, config=config))
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = result.stderr, [json.loads(line) for line in
                                     (tmp_path / name / "out" / "eval_history.jsonl").read_text().splitlines()]
    step_0 = {name: history[0] for name, (_, history) in runs.items()}
    assert step_0["post-LN"]["step"] == step_0["warm"]["step"] == 0
    for key in ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss"):
        assert abs(step_0["warm"][key] - step_0["post-LN"][key]) < 1e-6, key
    assert abs(step_0["cold"]["masked_lm_loss"] - step_0["post-LN"]["masked_lm_loss"]) > 1e-3
    warning = "is another function than the checkpoint at step 0"
    assert warning in runs["cold"][0] and warning not in runs["warm"][0]
    assert "carried scores weigh 0 at step 0, rising to 1 at step 3" in runs["warm"][0]

    warm_dir = tmp_path / "warm" / "out"
    assert json.loads((warm_dir / "training_options.json").read_text())["residual_attention_warmup_steps"] == 3
    (tmp_path / "plain").mkdir()
    plain = run(command(tmp_path / "plain", "--do_eval", f"--init_checkpoint={warm_dir / 'model.ckpt-4'}",
                        "--max_eval_steps=2", f"--input_file={RECORDS}", config={**TINY, "residual_attention": mode}))
    assert plain.returncode == 0, plain.stderr[-3000:]
    trained, read_back = eval_results(warm_dir), eval_results(tmp_path / "plain" / "out")
    for key in ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss"):
        assert abs(float(trained[key]) - float(read_back[key])) < 1e-6, key


def test_records_made_with_another_vocabulary_are_refused_at_the_start():
    """Token ids at or above the config's vocab_size: one line naming the file and the sizes."""
    import tensorflow as tf

    from bert_realformer.errors import InputError
    from bert_realformer.pretraining.input_pipeline import check_records
    largest = max(max(tf.train.Example.FromString(r.numpy()).features.feature[name].int64_list.value)
                  for r in tf.data.TFRecordDataset(RECORDS).take(16) for name in ("input_ids", "masked_lm_ids"))
    check_records([RECORDS], 64, 10, vocab_size=largest + 1)
    with pytest.raises(InputError, match=rf"plain.tfrecord: record \d+ has a token id {largest} in \w+, but the "
                                         rf"model's vocab_size is {largest}"):
        check_records([RECORDS], 64, 10, vocab_size=largest)


def test_multi_worker_on_loopback_matches_one_device(tmp_path):
    """Two worker processes (MultiWorkerMirroredStrategy, TF_CONFIG on 127.0.0.1) and one
    device train on the same global batches: the same losses (to the 4 printed decimals) and the same
    weights within 1e-5; so do two workers accumulating two micro-batches of half the batch (each
    worker's micro-batches are a quarter of it, taken in turn). Dropout is off so that the runs
    compute the same function; the RealFormer warm start is on (its factor set in each replica's
    step)."""
    config = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    flags = ["--do_train", "--num_train_steps=4", "--iterations_per_loop=1", "--save_checkpoints_steps=2",
             "--residual_attention_warmup_steps=3"]
    single_dir = tmp_path / "single"
    single_dir.mkdir()
    single = run(command(single_dir, *flags, config=config))
    assert single.returncode == 0, single.stderr[-3000:]
    assert len(step_losses(single.stderr)) == 4
    single_weights = checkpoints.read_tf1_checkpoint(str(single_dir / "out" / "model.ckpt-4"))

    accumulating = ["--train_batch_size=4", "--gradient_accumulation_steps=2"]
    ports = free_ports(4)
    clusters = {}  # (side by side: most of a worker's time is waiting for the other)
    for name, extra, cluster_ports in [("multi", [], ports[:2]), ("multi_accumulating", accumulating, ports[2:])]:
        (tmp_path / name).mkdir()
        clusters[name] = loopback_workers(command(tmp_path / name, *flags, "--distribution_strategy=multi_worker",
                                                  *extra, config=config), cluster_ports)
    for name, procs in clusters.items():
        outputs = finished(procs)
        # Printed to 4 decimals: a sum reduced in another order may round to the neighbouring digit.
        np.testing.assert_allclose(step_losses(outputs[0]), step_losses(single.stderr), rtol=0, atol=1.5e-4,
                                   err_msg=name)
        weights = checkpoints.read_tf1_checkpoint(str(tmp_path / name / "out" / "model.ckpt-4"))
        assert weights.keys() == single_weights.keys()
        for variable in weights:
            np.testing.assert_allclose(weights[variable], single_weights[variable], atol=1e-5,
                                       err_msg=f"{name}: {variable}")

