"""Watching a fine-tuning run in-process (the driver on a tiny classifier): the best checkpoint
and early stopping against a scripted metric, a crashed and resumed run picking the same best
step with the same weights, the stuck check on a run made to stick (a warning, and a later leaving of
chance beside it; a restart with the next seed, recorded and kept on resume), and the Adam bias
correction a run started with; a restart deadline no new attempt can meet."""

import io
import json
import shutil
import time
import types

import numpy as np
import pytest
import tensorflow as tf
from helpers.tiny_training import TINY, classification_task

import modeling
from bert_realformer.checkpoints import read_tf1_checkpoint
from bert_realformer.checkpoints.training_states import read_training_state
from bert_realformer.errors import InputError
from bert_realformer.finetuning import best_checkpoint
from bert_realformer.finetuning.best_checkpoint import Selection, load_best
from bert_realformer.finetuning.flow import Monitoring, monitoring_hooks
from bert_realformer.finetuning.restarts import RestartDeadline, train_restarting
from bert_realformer.finetuning.stuck import StuckWatch
from bert_realformer.training import recorded_options
from bert_realformer.training.driver import Driver, RunOptions

EVERY = 4
# The scripted metric of the evaluation at each step: best at 8, then three without improvement.
SCRIPT = {4: 0.50, 8: 0.70, 12: 0.60, 16: 0.70, 20: 0.65, 24: 0.90, 28: 0.95}


def _driver(out, stream=None, **options):
    return Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(TINY, 2),
                  RunOptions(seed_globally=True, output_dir=str(out), **options), stream=stream or io.StringIO())


def _monitored(task, evaluate, **monitoring):
    """(task, its monitoring hooks): what `driver.train` and `train_restarting`'s attempts take."""
    return task, monitoring_hooks(task, evaluate, Monitoring(**monitoring))


def _restarting(driver, make, on_stuck="warn", max_restarts=3, restart_deadline=0.0):
    """`train_restarting` of the attempts `make(seed) -> (task, evaluate, monitoring)` describe,
    with the restarts asked for."""
    def attempt(this):
        task, evaluate, monitoring = make(this.seed)
        return task, monitoring_hooks(task, evaluate, Monitoring(**monitoring, on_stuck=on_stuck,
                                                                 restart_deadline=restart_deadline), this)
    return train_restarting(driver, attempt, on_stuck, max_restarts)


def _scripted(calls=None, crash_at=None):
    def evaluate(step):
        if calls is not None:
            calls.append(step)
        if step == crash_at:
            raise RuntimeError("killed")
        return {"eval_accuracy": SCRIPT[step], "eval_loss": 1.0 - SCRIPT[step], "global_step": step}, None
    return evaluate


def _task(steps=28, patience=None, metric="eval_accuracy", evaluate=None, **kwargs):
    return _monitored(classification_task(steps, **kwargs), evaluate or _scripted(), num_classes=2,
                      every_steps=EVERY, selection=Selection.by(metric, patience=patience))


def test_selection_minimises_losses_and_keeps_the_earlier_of_a_tie():
    assert Selection.by("eval_loss").minimize and not Selection.by("eval_accuracy").minimize
    accuracy = Selection.by("eval_accuracy")
    assert accuracy.better(0.7, None) and accuracy.better(0.7, 0.6) and not accuracy.better(0.7, 0.7)
    assert Selection.by("loss").better(0.2, 0.3)
    with pytest.raises(InputError, match=r"keep_best_by=f1: the evaluation reports no such number; it reports: "
                                         r"eval_accuracy, eval_loss"):
        Selection.by("f1").value_of({"eval_accuracy": 0.5, "eval_loss": 0.7, "global_step": 3, "matrix": "[1]"})


def test_best_checkpoint_holds_the_best_steps_weights_and_patience_stops_the_run(tmp_path):
    out = tmp_path / "out"
    stream = io.StringIO()
    driver = _driver(out, stream, save_checkpoints_steps=4, keep_checkpoint_max=20)
    assert driver.train(*_task(patience=3)) == 20  # best at 8; 12, 16 (a tie), 20 do not improve
    record = best_checkpoint.read_record(str(out))
    assert record["step"] == 8 and record["value"] == 0.70 and record["metrics"]["eval_loss"] == pytest.approx(0.3)
    assert sorted(p.name for p in (out / "best").iterdir()) == [
        "best.json", "checkpoint", "model.ckpt-8.data-00000-of-00001", "model.ckpt-8.index"]
    best = read_tf1_checkpoint(str(out / "best" / "model.ckpt-8"))
    at_8 = read_training_state(str(out / "training_state" / "ckpt-8"))
    assert best.keys() == at_8.keys()
    for name in best:
        np.testing.assert_array_equal(best[name], at_8[name], err_msg=name)
    assert "early stopping at step 20: eval_accuracy has not improved in 3 evaluations (best: eval_accuracy " \
           "0.7000 at step 8)" in stream.getvalue()
    assert [json.loads(line)["step"] for line in (out / "eval_history.jsonl").read_text().splitlines()] == \
        [4, 8, 12, 16, 20]

    # The same command again: the run is over; no step, no evaluation.
    calls, again = [], io.StringIO()
    assert _driver(out, again, save_checkpoints_steps=4).train(*_task(patience=3, evaluate=_scripted(calls))) == 20
    assert calls == [] and "early stopping at step 20" in again.getvalue()

    # After training the best weights serve (eval, predict, export), said with their step.
    said = io.StringIO()
    driver = _driver(out, said)
    assert driver.use_weights(*load_best(driver.model, str(out))) == 8
    assert f"the best checkpoint {out}/best/model.ckpt-8 (eval_accuracy 0.7000 at step 8)" in said.getvalue()
    assert driver.restore_for_inference() == 20  # the weights policy alone: the last step


def test_a_loss_is_minimised_and_without_patience_training_runs_to_the_end(tmp_path):
    out = tmp_path / "out"
    assert _driver(out).train(*_task(metric="eval_loss")) == 28
    assert best_checkpoint.read_record(str(out))["step"] == 28  # the lowest eval_loss, 0.05


def test_a_crashed_run_resumed_picks_the_same_best_with_the_same_weights(tmp_path):
    """Killed at the evaluation of step 20 (the best of step 8 written, a training state of step
    16 the last), then run again: the same best step and weights as an uninterrupted run; no
    checkpoint of a later evaluation survives in best/."""
    whole = tmp_path / "whole"
    _driver(whole, save_checkpoints_steps=8).train(*_task(steps=24))
    crashed = tmp_path / "crashed"
    with pytest.raises(RuntimeError, match="killed"):
        _driver(crashed, save_checkpoints_steps=8).train(*_task(steps=24, evaluate=_scripted(crash_at=20)))
    assert best_checkpoint.read_record(str(crashed))["step"] == 8
    # As if killed after the best of a later evaluation was written (a best the resumed run must redo).
    (crashed / "best" / "model.ckpt-20.index").write_bytes((crashed / "best" / "model.ckpt-8.index").read_bytes())
    _assert_every_reader_takes(crashed, 8)
    calls = []
    _driver(crashed, save_checkpoints_steps=8).train(*_task(steps=24, evaluate=_scripted(calls)))
    assert calls == [20, 24]  # resumed from the state of step 16
    assert best_checkpoint.read_record(str(crashed))["step"] == best_checkpoint.read_record(str(whole))["step"] == 24
    assert sorted(p.name for p in (crashed / "best").glob("*.index")) == ["model.ckpt-24.index"]
    a = read_tf1_checkpoint(str(whole / "best" / "model.ckpt-24"))
    b = read_tf1_checkpoint(str(crashed / "best" / "model.ckpt-24"))
    for name in a:
        np.testing.assert_allclose(a[name], b[name], atol=1e-6, err_msg=name)


def _assert_every_reader_takes(out, step):
    """Every way of reading OUT/best takes model.ckpt-`step`: the run's own evaluation and
    prediction (`load_best`), and --init_checkpoint=OUT/best, `from_pretrained` and the converter
    (`training_states.resolve`)."""
    from bert_realformer.checkpoints import training_states
    found, _ = load_best(modeling.BertClassifier(TINY, 2), str(out))
    assert found.step == step
    assert training_states.resolve(str(out / "best")).prefix == str(out / "best" / f"model.ckpt-{step}")


def test_every_reader_of_the_best_checkpoint_takes_the_one_best_json_names(tmp_path):
    """A new best is written as its files, then best.json, then the `checkpoint` file: killed
    before best.json, every reader takes the previous best; killed after it, the new one."""
    out = tmp_path / "out"
    _driver(out).train(*_task(steps=12))  # bests at 4 and 8; 12 is worse
    best = out / "best"
    assert sorted(p.name for p in best.glob("*.index")) == ["model.ckpt-8.index"]
    for name in ("index", "data-00000-of-00001"):  # killed after a best of step 12 was saved
        (best / f"model.ckpt-12.{name}").write_bytes((best / f"model.ckpt-8.{name}").read_bytes())
    _assert_every_reader_takes(out, 8)
    record = json.loads((best / "best.json").read_text())
    (best / "best.json").write_text(json.dumps({**record, "step": 12}))  # killed after best.json
    _assert_every_reader_takes(out, 12)


def test_a_new_run_in_the_directory_does_not_inherit_an_old_best(tmp_path):
    out = tmp_path / "out"
    _driver(out).train(*_task(steps=12))
    for path in (out / "training_state").iterdir():
        path.unlink()
    (out / "training_state").rmdir()
    for path in out.glob("model.ckpt-*"):
        path.unlink()
    (out / "eval_history.jsonl").unlink()
    calls = []
    _driver(out).train(*_task(steps=4, evaluate=_scripted(calls)))
    assert calls == [4] and best_checkpoint.read_record(str(out))["step"] == 4


# ---------------------------------------------------------------------- the stuck check
def test_stuck_watch_windows_by_hand():
    """Warm-up 10, 100 steps: windows of 10 steps from step 11; the loss at ln 2 over 40% of the 90
    steps after warm-up (four windows in a row) makes a run stuck; one window away from it starts
    the count again."""
    watch = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
    assert watch.window == 10 and watch.stuck_windows == 4
    assert watch.next_boundary(0) == 10 and watch.next_boundary(10) == 20
    chance = np.log(2)
    watch.observe_loss(0, 10, 10 * 0.9)            # warm-up: not counted
    for step in (20, 30, 40):
        watch.observe_loss(step - 10, step, 10 * chance * 1.005)  # within 1%
    assert watch.next_boundary(40) == 50 and watch.verdict() is None
    watch.observe_loss(40, 50, 10 * chance * 0.97)   # 3% below: the count starts again
    watch.observe_loss(50, 55, 5 * chance)
    assert watch.next_boundary(55) == 60
    watch.observe_loss(55, 60, 5 * chance)
    for step in (70, 80):
        watch.observe_loss(step - 10, step, 10 * chance)
    assert watch.verdict() is None
    watch.observe_loss(80, 90, 10 * chance * 1.009)
    verdict = watch.verdict()
    assert verdict.from_loss and verdict.step == 90 and "over steps 51-90" in verdict.reason
    assert watch.verdict() is None  # said once
    assert watch.next_boundary(90) == 100  # nothing more to check

    no_classes = StuckWatch(None, 10, 100)  # regression: no loss sign
    no_classes.observe_loss(10, 100, 90 * chance)
    assert no_classes.verdict() is None and no_classes.next_boundary(0) == 100


def test_stuck_watch_says_nothing_before_the_warm_up_has_ended():
    """Warm-up 50 of 100 steps: a constant prediction at every evaluation and the loss at ln 2
    over all of the warm-up make no verdict; the same prediction after it makes one once it has
    lasted 40% of the steps after warm-up, counted from the first evaluation after it."""
    chance = np.log(2)
    watch = StuckWatch(2, num_warmup_steps=50, num_train_steps=100)
    for step in range(5, 51, 5):
        watch.observe_predictions(step, np.zeros(8))
        watch.observe_loss(step - 5, step, 5 * chance)
        assert watch.verdict() is None, step
    assert watch.next_boundary(50) == 50 + watch.window
    for step in (55, 60, 65, 70):
        watch.observe_predictions(step, np.zeros(8))
        assert watch.verdict() is None, step
    watch.observe_predictions(75, np.zeros(8))  # 40% of the 50 steps after warm-up, counted from step 55
    verdict = watch.verdict()
    assert verdict.step == 75 and "since step 55" in verdict.reason and not verdict.from_loss


def test_stuck_watch_a_run_that_leaves_chance_late_is_not_stuck():
    """The plateau a run that learns can have: at ln 2 for a third of the steps after warm-up."""
    watch = StuckWatch(2, num_warmup_steps=18, num_train_steps=187)
    chance = np.log(2)
    step = 18
    while step < 187:
        end = watch.next_boundary(step)
        watch.observe_loss(step, end, (end - step) * (chance if end <= 18 + 56 else 0.5))
        assert watch.verdict() is None, end
        step = end


def _feed(watch, losses, step):
    """One loop to the watch's next boundary at each mean loss of `losses`, from `step`; returns
    the last step."""
    for loss in losses:
        end = watch.next_boundary(step)
        watch.observe_loss(step, end, (end - step) * loss)
        step = end
    return step


def test_stuck_watch_after_a_warning_sees_the_run_leave_chance():
    """Warm-up 10, 200 steps, windows of 20: the verdict at step 90 (four windows at ln 2); the
    windows go on, one within the band says nothing, the first below it is said once, and the
    watch then lets the run go to its end."""
    chance = np.log(2)
    watch = StuckWatch(2, num_warmup_steps=10, num_train_steps=200)
    assert _feed(watch, [0.9] + [chance] * 4, 0) == 90 and watch.verdict().step == 90
    assert watch.next_boundary(90) == 110
    assert _feed(watch, [chance * 0.995], 90) == 110 and watch.left_chance() is None
    assert _feed(watch, [0.6], 110) == 130
    left = watch.left_chance()
    assert left.step == 130 and left.from_loss
    assert left.reason == "the training loss averaged 0.6000 over steps 111-130, below ln 2 = 0.6931: the run is " \
        "learning after all"
    assert watch.left_chance() is None and watch.next_boundary(130) == 200

    # A verdict from the evaluations (the loss may sit below ln K on unbalanced classes): no watch after it.
    by_predictions = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
    for step in (20, 40, 60):
        by_predictions.observe_predictions(step, np.zeros(8))
    assert not by_predictions.verdict().from_loss and by_predictions.next_boundary(60) == 100


def test_a_warned_run_that_leaves_chance_is_recorded_once_beside_its_warning(tmp_path):
    """`act_on_verdict` after each loop: the warning, then the leaving window in
    training_options.json and the log; a resumed run's watch that sees a later window leave chance
    again adds nothing."""
    from bert_realformer.finetuning.restarts import act_on_verdict
    said = []

    def act(watch):
        act_on_verdict(watch, 0, str(tmp_path), 1e-3, True, said.append)

    chance = np.log(2)
    watch = StuckWatch(2, num_warmup_steps=10, num_train_steps=200)
    _feed(watch, [0.9] + [chance] * 4, 0)
    act(watch)
    saved = watch.state()  # (at step 90)
    resumed, twin = StuckWatch(2, 10, 200), StuckWatch(2, 10, 200)
    resumed.resume(saved)
    twin.resume(saved)
    _feed(watch, [0.6], 90)
    act(watch)
    stuck = recorded_options.read(str(tmp_path))["stuck"]
    assert stuck["step"] == 90 and stuck["left_at_step"] == 110
    assert said[0].startswith("warning: this run looks stuck") and len(said) == 2
    assert said[1] == f"this run has left chance since its warning: {stuck['left_reason']}"
    for resumed_watch in (resumed, twin):
        _feed(resumed_watch, [chance, 0.5], 90)
    assert twin.left_chance().step == 130  # what the resumed watch sees
    act(resumed)
    assert recorded_options.read(str(tmp_path))["stuck"] == stuck and len(said) == 2


def test_stuck_watch_needs_constant_evaluations_over_40_percent_of_the_run():
    watch = StuckWatch(3, num_warmup_steps=10, num_train_steps=100)  # 36 steps
    watch.observe_predictions(10, np.zeros(20))   # during warm-up: not judged
    watch.observe_predictions(20, np.zeros(20))
    watch.observe_predictions(50, np.zeros(20))
    assert watch.verdict() is None
    watch.observe_predictions(55, np.arange(20) % 3)  # learning: the count starts again
    for step in (60, 70, 80, 90):
        watch.observe_predictions(step, np.full(20, 2))
        assert watch.verdict() is None
    watch.observe_predictions(100, np.full(20, 2), label_names=["a", "b", "c"])
    verdict = watch.verdict()
    assert not verdict.from_loss
    assert verdict.reason == ("all 20 predictions of the evaluation are one class, 'c', as at every evaluation "
                              "since step 60")


def test_stuck_watch_resumed_from_its_state_finds_what_the_whole_run_finds():
    """Saved at each step of a run and resumed there, the watch gives the whole run's verdict at
    its step; a verdict already said stays said."""
    chance = np.log(2)
    losses = {step: chance * (1.03 if step <= 30 else 1.004) for step in range(11, 101)}

    def run(watch, start=10, stop=100):
        step, verdicts = start, []
        while step < stop:
            end = watch.next_boundary(step)
            watch.observe_loss(step, end, sum(losses.get(s, 0.9) for s in range(step + 1, end + 1)))
            verdict = watch.verdict()
            if verdict is not None:
                verdicts.append((verdict.step, verdict.reason))
            step = end
        return verdicts

    whole = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
    expected = run(whole, start=0)
    assert [step for step, _ in expected] == [70] and "over steps 31-70" in expected[0][1]
    for saved_at in (10, 30, 40, 60, 70):
        first = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
        said = run(first, start=0, stop=saved_at)
        resumed = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
        resumed.resume(first.state())
        assert said + run(resumed, start=saved_at) == expected, saved_at
    # Found and not yet acted on when the state was saved (the save comes before the act, at the
    # verdict's step): the resumed watch gives it.
    at_verdict = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
    run(at_verdict, start=0, stop=70)
    found = StuckWatch(2, num_warmup_steps=10, num_train_steps=100)
    found.resume({**at_verdict.state(), "reported": 0.0})
    assert found.verdict().reason == expected[0][1]


def _crashing_evaluate(crash_at):
    def evaluate(step):
        if step == crash_at:
            raise RuntimeError("killed")
        return {"eval_accuracy": 0.5, "global_step": step}, None
    return evaluate


def test_a_stuck_run_crashed_and_resumed_is_found_at_the_whole_runs_step(tmp_path):
    """Killed after its training state of step 16 (before any verdict): the resumed run goes on
    with the stuck check's windows and is found stuck at the step the whole run was; a restart
    happens there too."""
    def task(seed, crash_at=None):
        return (classification_task(30, seed=seed, learning_rate=1e-9, num_warmup_steps=4),
                _crashing_evaluate(crash_at), {"num_classes": 2, "every_steps": 8})

    _restarting(_driver(tmp_path / "whole", save_checkpoints_steps=8), task)
    whole = recorded_options.read(str(tmp_path / "whole"))["stuck"]
    assert whole["step"] == 24  # (windows of 10 from step 5: two at ln 2)
    out = tmp_path / "resumed"
    with pytest.raises(RuntimeError, match="killed"):
        _restarting(_driver(out, save_checkpoints_steps=8), lambda seed: task(seed, crash_at=16))
    assert recorded_options.read(str(out))["stuck"] is None
    _restarting(_driver(out, save_checkpoints_steps=8), task)
    assert recorded_options.read(str(out))["stuck"] == whole

    restarted = tmp_path / "restarted"
    with pytest.raises(RuntimeError, match="killed"):
        _restarting(_driver(restarted, save_checkpoints_steps=8), lambda seed: task(seed, crash_at=16),
                    on_stuck="restart", max_restarts=1)
    _restarting(_driver(restarted, save_checkpoints_steps=8), task, on_stuck="restart", max_restarts=1)
    assert recorded_options.read(str(restarted))["restarts"][0]["step"] == 24

    # A training state without the check's windows (a run without it) resumes; its windows start there.
    older = tmp_path / "older"
    _driver(older, save_checkpoints_steps=8).train(classification_task(8, learning_rate=1e-9, num_warmup_steps=4))
    keys = [name for name, _ in tf.train.list_variables(str(older / "training_state"))]
    assert "input_position/.ATTRIBUTES/VARIABLE_VALUE" in keys and not any("stuck_watch" in key for key in keys)
    assert _restarting(_driver(older, save_checkpoints_steps=8), task) == 30
    assert recorded_options.read(str(older))["stuck"]["step"] == 28  # (windows from step 8)


def _stuck_task(seed, steps=40):
    """A run that learns nothing: a learning rate so small that the loss stays at ln 2."""
    return classification_task(steps, seed=seed, learning_rate=1e-9, num_warmup_steps=4), None, {"num_classes": 2}


def test_a_stuck_run_warns_once_with_what_it_saw(tmp_path):
    stream = io.StringIO()
    assert _restarting(_driver(tmp_path / "out", stream), _stuck_task) == 40
    lines = [line for line in stream.getvalue().splitlines() if "looks stuck" in line]
    assert len(lines) == 1
    assert lines[0].startswith("warning: this run looks stuck: the training loss has stayed within 1% of ln 2 = "
                               "0.6931, the loss of a model that has learned nothing, over steps 5-")
    assert lines[0].endswith("another --seed, a lower --learning_rate (now 1e-09), --adam_bias_correction, or "
                             "--on_stuck=restart")
    stuck = recorded_options.read(str(tmp_path / "out"))["stuck"]
    assert lines[0].startswith(f"warning: this run looks stuck: {stuck['reason']}")
    assert f"-{stuck['step']} (mean " in stuck["reason"] and 4 < stuck["step"] < 40

    # A new run in the directory (its training state gone) starts with no verdict of its own.
    shutil.rmtree(tmp_path / "out" / "training_state")
    _driver(tmp_path / "out").train(*_monitored(classification_task(6), None, num_classes=2))
    assert recorded_options.read(str(tmp_path / "out"))["stuck"] is None


def test_on_stuck_restart_starts_again_with_the_next_seed_and_a_resume_keeps_it(tmp_path):
    out = tmp_path / "out"
    stream = io.StringIO()
    seeds = []

    def task(seed):
        seeds.append(seed)
        return _stuck_task(seed, steps=30)

    driver = _driver(out, stream, seed=5, adam_bias_correction=True)
    assert _restarting(driver, task, on_stuck="restart", max_restarts=2) == 30
    assert seeds == [5, 6, 7]  # two restarts, then the last run goes on (with a warning)
    text = stream.getvalue()
    assert text.count("starting again from the initial weights") == 2
    assert "with --seed=6 (restart 1 of at most 2)" in text and "with --seed=7 (restart 2 of at most 2)" in text
    warning = [line for line in text.splitlines() if line.startswith("warning: this run looks stuck")]
    assert len(warning) == 1 and warning[0].endswith("another --seed, or a lower --learning_rate (now 1e-09)")
    record = recorded_options.read(str(out))
    assert record["seed"] == 7 and [r["seed"] for r in record["restarts"]] == [5, 6]
    assert record["adam_bias_correction"] is True
    assert (out / "stuck_runs" / "seed-5" / "train").is_dir() and (out / "stuck_runs" / "seed-6").is_dir()

    # A later run of the same command resumes the restarted run: its seed, no new restart.
    resumed = io.StringIO()
    driver = _driver(out, resumed, seed=5, keep_recorded_seed=True)
    assert driver.options.seed == 7
    assert "resuming with --seed=7, the seed this run restarted with; --seed=5 applies to new runs" in \
        resumed.getvalue()


def test_a_run_stuck_by_its_evaluations_restarts_with_the_next_seed(tmp_path):
    """A run whose loss leaves ln 2 but whose every evaluation gives one class (scripted):
    --on_stuck=restart restarts it as a loss verdict would, saying the evaluations' reason."""
    out, stream, seeds = tmp_path / "out", io.StringIO(), []

    def one_class(step):
        return {"eval_accuracy": 0.5, "global_step": step}, np.zeros(16, np.int64)

    def task(seed):
        seeds.append(seed)
        return classification_task(40, seed=seed, num_warmup_steps=4), one_class, {
            "num_classes": 2, "every_steps": EVERY, "selection": Selection.by("eval_accuracy"),
            "label_names": ["neg", "pos"]}

    assert _restarting(_driver(out, stream, seed=5), task, on_stuck="restart", max_restarts=1) == 40
    assert seeds == [5, 6]
    text = stream.getvalue()
    assert "all 16 predictions of the evaluation are one class, 'neg', as at every evaluation since step 8; " \
           "starting again from the initial weights with --seed=6 (restart 1 of at most 1)" in text, text
    record = recorded_options.read(str(out))
    assert [r["seed"] for r in record["restarts"]] == [5] and record["restarts"][0]["reason"].startswith("all 16")
    assert record["stuck"]["reason"].startswith("all 16 predictions")  # (the restarted run, out of restarts)


def test_a_run_of_several_workers_stuck_by_its_evaluations_says_why_it_does_not_restart(tmp_path):
    from bert_realformer.finetuning.restarts import act_on_verdict
    watch = StuckWatch(2, 0, 20)
    for step in (4, 8, 12):
        watch.observe_predictions(step, np.zeros(8, np.int64), ["neg", "pos"])
    said = []
    act_on_verdict(watch, 2, str(tmp_path), 1e-3, True, said.append, restarting=True, one_worker=False)
    assert said == ["warning: this run looks stuck: all 8 predictions of the evaluation are one class, 'neg', as at "
                    "every evaluation since step 4; no restart: found from the evaluations, which only the chief "
                    "sees: a run of several workers restarts on its training loss alone; what usually helps: another "
                    "--seed, or a lower --learning_rate (now 0.001)"]
    assert recorded_options.read(str(tmp_path))["stuck"]["no_restart"].startswith("found from the evaluations")


def test_the_stuck_warning_names_first_the_option_on_that_most_likely_caused_it(tmp_path):
    from bert_realformer.finetuning.adversarial import Adversary
    from bert_realformer.finetuning.contract import TaskOptions
    from bert_realformer.finetuning.flow import Plan, training_hooks
    from bert_realformer.finetuning.restarts import Attempt, StuckCheck, act_on_verdict
    from bert_realformer.finetuning.schedule import Schedule
    from bert_realformer.tasks.classification.task import ClassificationOptions, ClassificationTask

    def task(**options):
        return ClassificationTask(TaskOptions(str(tmp_path), 64), ClassificationOptions("generic", str(tmp_path),
                                                                                        **options))

    def hint(plan, of):
        hooks = training_hooks(plan, of, classification_task(8), None, Attempt())
        return next(hook for hook in hooks if isinstance(hook, StuckCheck)).hint

    plain = Plan(do_train=True, schedule=Schedule(8, 1e-3, 1.0))
    pooled = task(doc_stride=32, window_training="pooled")
    assert hint(plain, task()) is None and hint(plain, task(doc_stride=32, window_training="separate")) is None
    assert hint(plain, pooled).startswith("--window_training=separate (pooled windows train each document")
    adversarial = hint(Plan(do_train=True, schedule=Schedule(8, 1e-3, 1.0), adversary=Adversary("pgd", 0.05)), pooled)
    assert adversarial.startswith("a smaller --adversarial_epsilon (now 0.05) or no --adversarial")

    watch = StuckWatch(2, 0, 20)
    for step in (4, 8, 12):
        watch.observe_predictions(step, np.zeros(8, np.int64))
    said = []
    act_on_verdict(watch, 0, str(tmp_path), 1e-3, True, said.append, hint=adversarial)
    assert said[0].endswith(f"what usually helps: {adversarial}, another --seed, a lower --learning_rate (now "
                            "0.001), or --on_stuck=restart"), said


def test_restart_deadline_by_hand():
    """A restart is allowed when the new attempt, at this attempt's pace, would end by the
    deadline: 40 steps in 20 s from step 10 (0.5 s/step), 100 steps again take 50 s."""
    now = [1000.0]
    deadline = RestartDeadline(1080.0, 10, clock=lambda: now[0])
    assert deadline.refusal(10, 100) is None  # (no pace yet: a restart now ends now)
    now[0] = 1020.0
    assert deadline.refusal(50, 100) is None  # ends at 1070, before 1080
    now[0] = 1040.0
    assert deadline.refusal(90, 100).startswith("started again it would end about ")  # 1040 + 50 = 1090
    assert "after --restart_deadline (" in deadline.refusal(90, 100)
    assert RestartDeadline(0.0, 0, clock=lambda: now[0]).refusal(90, 100) is None  # 0: no limit


def test_a_stuck_run_past_its_restart_deadline_warns_and_goes_on(tmp_path):
    """--on_stuck=restart with restarts left but a deadline no new attempt can meet: no restart,
    the warning says why, and the record keeps it; a deadline far off restarts as before."""
    out, stream, seeds = tmp_path / "late", io.StringIO(), []

    def task(seed):
        seeds.append(seed)
        return _stuck_task(seed, steps=30)

    driver = _driver(out, stream, seed=5)
    assert _restarting(driver, task, on_stuck="restart", max_restarts=2, restart_deadline=time.time()) == 30
    assert seeds == [5]
    warning = [line for line in stream.getvalue().splitlines() if "looks stuck" in line]
    assert len(warning) == 1 and "; no restart: started again it would end about " in warning[0]
    assert warning[0].endswith("or --adam_bias_correction")  # (no --on_stuck=restart: it has it)
    stuck = recorded_options.read(str(out))["stuck"]
    assert stuck["no_restart"].startswith("started again it would end about ") and not (out / "stuck_runs").exists()

    seeds.clear()
    driver = _driver(tmp_path / "early", seed=5)
    assert _restarting(driver, task, on_stuck="restart", max_restarts=1,
                       restart_deadline=time.time() + 3600) == 30 and seeds == [5, 6]


def test_a_restart_deadline_is_refused_for_several_workers():
    from bert_realformer.finetuning.restarts import restart_deadline_for

    def strategy(jobs):
        resolver = types.SimpleNamespace(task_type="worker", cluster_spec=lambda: tf.train.ClusterSpec(jobs))
        return types.SimpleNamespace(cluster_resolver=resolver)
    assert restart_deadline_for(5.0, tf.distribute.OneDeviceStrategy("/cpu:0")) == 5.0
    assert restart_deadline_for(5.0, strategy({"worker": ["localhost:1"]})) == 5.0  # (one process)
    assert restart_deadline_for(0.0, strategy({"worker": ["localhost:1", "localhost:2"]})) == 0.0
    with pytest.raises(InputError, match=r"^restart_deadline: not for a multi-worker run"):
        restart_deadline_for(5.0, strategy({"chief": ["localhost:1"], "worker": ["localhost:2"]}))


# ---------------------------------------------------------------------- Adam bias correction
def test_a_resumed_run_keeps_the_bias_correction_it_started_with(tmp_path):
    """Stopped after 4 of 8 steps with correction on; resumed with the flag off: it says so and
    ends with the weights of an uninterrupted run with correction on (not of one without)."""
    weights = {}
    for name, on in (("on", True), ("off", False)):
        _driver(tmp_path / name, adam_bias_correction=on).train(classification_task(8))
        weights[name] = read_training_state(str(tmp_path / name))
    out = tmp_path / "resumed"
    stopped = _monitored(classification_task(8), _scripted(crash_at=4), num_classes=2, every_steps=4)
    with pytest.raises(RuntimeError, match="killed"):  # after the training state of step 4
        _driver(out, adam_bias_correction=True, save_checkpoints_steps=4).train(*stopped)
    assert recorded_options.read(str(out))["adam_bias_correction"] is True
    stream = io.StringIO()
    _driver(out, stream, adam_bias_correction=False).train(classification_task(8))
    assert "resuming with Adam bias correction on, as this run started" in stream.getvalue()
    resumed = read_training_state(str(out))
    assert max(np.abs(weights["on"][n] - weights["off"][n]).max() for n in resumed) > 1e-3
    for name in resumed:
        np.testing.assert_allclose(resumed[name], weights["on"][name], atol=1e-6, err_msg=name)
