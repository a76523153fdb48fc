"""run_study.py end to end on a tiny model: a study of one seed, extended to two (the first
seed's runs re-used), the study stopped by SIGTERM in an unfinished run and that run resumed alone
to the unstopped results, a changed flag refused; results.json
checked against the runs' own files and the hand formula, report.md and its plots written."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers import script_processes
from helpers.pretraining_runs import RECORDS, ROOT, TINY

from bert_realformer.comparison import plan
from bert_realformer.comparison.report import stuck_line

pytestmark = pytest.mark.slow

VOCAB = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_en_uncased.txt")


def _classification_data(directory):
    """A two-class generic task from the fortunes corpus: is the line longer than 60 characters?
    Returns the dev accuracy of always answering train's majority label."""
    lines = [line for line in open(os.path.join(ROOT, "tests", "data", "pretraining_data", "input.txt"),
                                   encoding="utf-8").read().splitlines() if line.strip()]
    directory.mkdir()
    for split, part in (("train", lines[:60]), ("dev", lines[60:90])):
        rows = "".join(f"{'long' if len(t) > 60 else 'short'}\t{t}\n" for t in part)
        (directory / f"{split}.tsv").write_text("label\ttext\n" + rows)
    train_long = sum(len(t) > 60 for t in lines[:60])
    dev_long = sum(len(t) > 60 for t in lines[60:90])
    return (dev_long if train_long > 30 else 30 - dev_long) / 30


def _study(tmp_path, *flags, stop_at=None, task_flags=""):
    config = tmp_path / "base.json"
    config.write_text(json.dumps({k: v for k, v in TINY.items() if k != "residual_attention"}))
    command = [sys.executable, os.path.join(ROOT, "run_study.py"), f"--output_dir={tmp_path / 'study'}",
               f"--bert_config_file={config}", f"--vocab_file={VOCAB}", f"--input_file={RECORDS}",
               f"--eval_input_file={RECORDS}", "--max_seq_length=64", "--max_predictions_per_seq=10",
               "--train_batch_size=8", "--num_train_steps=6", "--num_warmup_steps=1", "--learning_rate=1e-3",
               "--eval_every_steps=3", "--max_eval_steps=2", "--eval_batch_size=8", "--attention_examples=16",
               "--variants=post-LN,RealFormer",
               f"--task=lines=run_classifier.py --task_name=generic --data_dir={tmp_path / 'lines'} "
               f"--max_seq_length=32 --train_batch_size=8 --num_train_epochs=1{task_flags}", *flags]
    if stop_at is None:
        return script_processes.run(command, capture_output=True, text=True, timeout=900)
    # SIGTERM once the study prints `stop_at` (a run it starts), a moment into that run
    proc = script_processes.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = []
    for line in proc.stdout:
        printed.append(line)
        if stop_at in line:
            time.sleep(2)
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(command, proc.returncode, "".join(printed) + out, err)


def test_a_study_grows_by_a_seed_resumes_a_run_and_aggregates_by_seed(tmp_path):
    majority = _classification_data(tmp_path / "lines")
    first = _study(tmp_path, "--seeds=1")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "[pretrain post-LN seed 1] python run_pretraining.py" in first.stdout
    assert "[study] run 1 of 6: pretrain post-LN seed 1 (0m00s so far, the time left is known once" in first.stdout
    # (by then a run of every kind has finished: the time left is estimated)
    assert re.search(r"\[study\] run 4 of 6: pretrain RealFormer seed 1 \(\d+m\d\ds so far, about \d+m\d\ds left\)",
                     first.stdout), first.stdout
    assert "6 runs ran, 0 re-used" in first.stderr

    second = _study(tmp_path, "--seeds=1,2")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert second.stdout.count("done already") == 6 and "6 runs ran, 6 re-used" in second.stderr
    study = tmp_path / "study"
    data = json.loads((study / "results.json").read_text())
    assert data["seeds"] == [1, 2] and data["variants"] == ["post-LN", "RealFormer"]

    # every pretraining run evaluated before training and at steps 3 and 6, as its eval history says
    history_file = study / "runs" / "realformer" / "seed-2" / "pretraining" / "eval_history.jsonl"
    history = [json.loads(line) for line in history_file.read_text().splitlines()]
    assert [p["step"] for p in history] == [0, 3, 6]
    def final(variant, seed, task, metric):
        rows = [r for r in data["runs"] if (r["variant"], r["seed"], r["task"], r["metric"]) ==
                (variant, seed, task, metric)]
        return max(rows, key=lambda r: r["step"])["value"]
    assert final("RealFormer", 2, "pretraining", "masked_lm_accuracy") == history[-1]["masked_lm_accuracy"]
    dev = dict(line.split(" = ") for line in
               (study / "runs" / "post_ln" / "seed-1" / "lines" / "eval_results.txt").read_text().splitlines())
    assert final("post-LN", 1, "lines", "eval_accuracy") == float(dev["eval_accuracy"])

    # the summary: mean, std and the paired difference, by the hand formula (t(0.975, 1) = 12.7062)
    entry = next(e for e in data["summary"] if (e["task"], e["metric"], e["variant"]) ==
                 ("pretraining", "masked_lm_loss", "RealFormer"))
    values = [final("RealFormer", s, "pretraining", "masked_lm_loss") for s in (1, 2)]
    assert entry["n"] == 2 and entry["mean"] == pytest.approx(sum(values) / 2)
    assert entry["std"] == pytest.approx(abs(values[0] - values[1]) / math.sqrt(2))
    d = [final("RealFormer", s, "pretraining", "masked_lm_loss") - final("post-LN", s, "pretraining", "masked_lm_loss")
         for s in (1, 2)]
    diff = entry["difference_to_post_ln"]
    half = 12.7062 * (abs(d[0] - d[1]) / math.sqrt(2)) / math.sqrt(2)
    assert diff["mean"] == pytest.approx(sum(d) / 2, abs=1e-9)
    assert diff["ci95"] == pytest.approx([sum(d) / 2 - half, sum(d) / 2 + half], abs=1e-4)
    assert data["baselines"]["lines"]["eval_accuracy"] == pytest.approx(majority)
    assert data["baselines"]["lines"]["macro_f1"] == pytest.approx(2 * majority / (majority + 1) / 2)
    assert 0 < data["baselines"]["pretraining"]["masked_lm_accuracy"] < 0.2

    report = (study / "report.md").read_text()
    assert "| RealFormer | " in report and "## lines (" in report and "| *baseline (no model)* |" in report
    # the stuck runs the report names are those whose records say so (none, or a tiny run at chance)
    said_stuck = sorted((variant, seed) for variant in ("post-LN", "RealFormer") for seed in (1, 2)
                        if json.loads((study / "runs" / plan.slug(variant) / f"seed-{seed}" / "lines" /
                                       "training_options.json").read_text()).get("stuck"))
    assert sorted((run["variant"], run["seed"]) for run in data["stuck_runs"]) == said_stuck
    assert stuck_line(data["stuck_runs"], "lines") in report
    for plot in ("mlm_accuracy.png", "attention_entropy.png", "attention_jsd.png"):
        assert (study / plot).stat().st_size > 1000

    # a run that did not finish (nothing but its command left) runs again; the study stopped
    # (SIGTERM) while it trains ends in one line; run again, it resumes that run alone, to the
    # unstopped results (a run left only to evaluate could finish before the signal)
    for entry in (study / "runs" / "realformer" / "seed-2" / "lines").iterdir():
        if entry.name != "command.txt":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    stopped = _study(tmp_path, "--seeds=1,2", stop_at="[lines RealFormer seed 2] python run_classifier.py")
    assert stopped.returncode == 143, stopped.stdout[-3000:] + stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1].startswith("error: stopped by SIGTERM")
    assert not (study / "runs" / "realformer" / "seed-2" / "lines" / "eval_results.txt").exists()
    third = _study(tmp_path, "--seeds=1,2")
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    assert "1 runs ran, 11 re-used" in third.stderr
    assert "[lines RealFormer seed 2] python run_classifier.py" in third.stdout
    again = json.loads((study / "results.json").read_text())
    assert len(again["runs"]) == len(data["runs"])
    for a, b in zip(again["runs"], data["runs"]):
        assert a["metric"] == b["metric"] and a["value"] == pytest.approx(b["value"], abs=1e-6)

    # other flags on the same directory: refused, naming the run and the flag
    changed = _study(tmp_path, "--seeds=1,2", "--learning_rate=5e-4")
    assert changed.returncode == 2
    last = changed.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "holds a run made with other flags" in last
    assert "--learning_rate=0.0005" in last


def test_a_study_sized_to_a_budget_runs_its_share_and_keeps_it(tmp_path):
    """A budget already spent when the study starts (--time_budget_start 31 minutes ago, as `make
    demo` passes the time before it prepared the data; 30 minutes): it times the pretraining step
    (a probe, removed after), says so, and runs a tenth of the steps and epochs; run again, it
    keeps the recorded sizing (the same commands: every run re-used, no new probe). The task run,
    restarting when stuck and last, may restart only while the budget lasts."""
    _classification_data(tmp_path / "lines")
    started = round(time.time() - 31 * 60)
    flags = ("--seeds=1", "--variants=post-LN", "--num_train_steps=12", "--time_budget_minutes=30",
             f"--time_budget_start={started}")
    sized = _study(tmp_path, *flags, task_flags=" --on_stuck=restart")
    assert sized.returncode == 0, sized.stdout[-3000:] + sized.stderr[-3000:]
    said = [line for line in sized.stdout.splitlines() if line.startswith("[study] this CPU runs")]
    assert len(said) == 1 and re.search(
        r"at [0-9.]+ steps/s: the study as asked takes about \d+ minutes, over the budget of 30 "
        r"\(3[12]\.\d of it spent before the first run\), so it runs "
        r"0.10 of each task's epochs and pretraining for 1 of 12 steps; with fewer steps its models may not "
        r"leave the unigram stage: report.md says whether they did \(without --time_budget_minutes: the whole "
        r"study\)$", said[0]), said
    study = tmp_path / "study"
    recorded = json.loads((study / "sizing.json").read_text())
    assert recorded["factor"] == recorded["finetuning_factor"] == 0.1 and 31 <= recorded["spent_minutes"] < 33
    assert recorded["budget_ends_at"] == started + 30 * 60
    assert f"--do_train --do_eval --restart_deadline={started + 30 * 60}\n" in sized.stdout
    assert not (study / ".sizing-probe").exists()
    assert "--num_train_steps=1 " in sized.stdout and "--num_train_epochs=0.1" in sized.stdout
    history = (study / "runs" / "post_ln" / "seed-1" / "pretraining" / "eval_history.jsonl").read_text()
    assert [json.loads(line)["step"] for line in history.splitlines()] == [0, 1]
    # one step leaves the model at the unigram stage at best, and the report says so
    assert "**No variant has left the unigram stage**: held-out MLM accuracy after 1 step within 0.003" in (
        study / "report.md").read_text()

    again = _study(tmp_path, *flags, task_flags=" --on_stuck=restart")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "0 runs ran, 3 re-used" in again.stderr
    assert [line for line in again.stdout.splitlines() if line.startswith("[study] this CPU runs")] == said
