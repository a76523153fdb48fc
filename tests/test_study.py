"""The study's parts with known answers: statistics against hand-worked values, aggregation and
pairing by seed, the plan's runs, re-use and the recorded-command guard, the eval history file,
and the data it is built on (People's Daily articles, the part-of-speech task)."""

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
from helpers import script_processes

from bert_realformer.comparison import execution, plan, results, statistics
from bert_realformer.errors import InputError
from bert_realformer.training.evaluation import EvalHistory, PeriodicEval, once_per_step, read_history


def test_summary_is_mean_and_sample_standard_deviation():
    s = statistics.summary([0.70, 0.72, 0.74])
    assert s["n"] == 3 and s["mean"] == pytest.approx(0.72)
    assert s["std"] == pytest.approx(0.02)  # sqrt((0.02^2 + 0 + 0.02^2) / 2)
    assert statistics.summary([0.5]) == {"mean": 0.5, "std": 0.0, "n": 1}


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_t_quantile_matches_the_printed_table(df, expected):
    assert statistics.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_matches_scipy_at_other_probabilities():
    from scipy.stats import t
    for df in (1, 2, 3, 6, 7, 15):
        for p in (0.6, 0.9, 0.995):
            assert statistics.t_quantile(p, df) == pytest.approx(t.ppf(p, df), rel=1e-9)


def test_paired_difference_by_hand():
    # differences 0.1, 0.2, 0.0 over the shared seeds 1-3 (seed 4 has no post-LN run):
    # mean 0.1, std 0.1, half width 4.3027 * 0.1 / sqrt(3) = 0.24841
    values = {1: 0.5, 2: 0.7, 3: 0.6, 4: 0.9}
    baseline = {3: 0.6, 1: 0.4, 2: 0.5}
    d = statistics.paired_difference(values, baseline)
    assert d["seeds"] == [1, 2, 3] and d["n"] == 3
    assert d["mean"] == pytest.approx(0.1) and d["std"] == pytest.approx(0.1)
    assert d["ci95"] == pytest.approx([0.1 - 0.248414, 0.1 + 0.248414], abs=1e-5)
    assert statistics.paired_difference({1: 0.5}, {1: 0.25})["ci95"] is None
    assert statistics.paired_difference({1: 0.5}, {2: 0.25}) is None


def _row(variant, seed, metric, value, step, task="pretraining"):
    return {"variant": variant, "seed": seed, "task": task, "metric": metric, "value": value, "step": step}


def test_aggregate_takes_each_runs_last_step_and_pairs_by_seed():
    points = [("post-LN", 1, 0.10, 500), ("post-LN", 1, 0.30, 1000), ("post-LN", 2, 0.34, 1000),
              ("post-LN", 2, 0.12, 500), ("RealFormer", 2, 0.35, 1000), ("RealFormer", 1, 0.33, 1000),
              ("RealFormer", 1, 0.90, 500)]
    rows = [_row(variant, seed, "masked_lm_accuracy", value, step) for variant, seed, value, step in points]
    summary = results.aggregate(rows, ("post-LN", "RealFormer"))
    post, real = summary
    assert (post["variant"], post["n"]) == ("post-LN", 2) and post["mean"] == pytest.approx(0.32)
    assert post["std"] == pytest.approx(math.sqrt(0.0008))
    assert "difference_to_post_ln" not in post
    diff = real["difference_to_post_ln"]
    # paired: seed 1 +0.03, seed 2 +0.01 -> mean 0.02, std 0.014142, t(0.975, 1) = 12.7062
    assert diff["mean"] == pytest.approx(0.02) and diff["std"] == pytest.approx(math.sqrt(0.0002))
    half = 12.7062 * math.sqrt(0.0002) / math.sqrt(2)
    assert diff["ci95"] == pytest.approx([0.02 - half, 0.02 + half], abs=1e-4)
    # unpaired, the same numbers would give a wider spread: pairing is what was used
    assert diff["std"] < math.sqrt(post["std"] ** 2 + real["std"] ** 2)


def _plan(tmp_path, tasks=(), variants=("post-LN", "pre-LN", "RealFormer"), seeds=(1, 2)):
    return plan.StudyPlan(output_dir=str(tmp_path / "study"), variants=variants, seeds=seeds,
                          base_config={"hidden_size": 32}, pretraining_flags=["--input_file=x", "--max_seq_length=64"],
                          num_train_steps=100, tasks=list(tasks), vocab_file="vocab.txt", attention_input="heldout")


def test_the_plan_gives_each_run_its_directory_and_a_seed_shared_across_variants(tmp_path):
    task = plan.DownstreamTask.parse("sentiment=run_classifier.py --task_name=thucnews --data_dir='my data'")
    assert task.flags == ("--task_name=thucnews", "--data_dir=my data")
    study = _plan(tmp_path, [task])
    runs = study.runs()
    assert len(runs) == 2 * 3 * 3 and len({r.directory for r in runs}) == len(runs)
    assert [r.name for r in runs[:3]] == ["pretrain post-LN seed 1", "attention post-LN seed 1",
                                          "sentiment post-LN seed 1"]
    for run in runs:
        assert f"--seed={run.seed}" in run.command or run.kind == plan.ATTENTION
        assert f"seed-{run.seed}" in run.directory and plan.slug(run.variant) in run.directory
    fine_tune = runs[2].command
    assert fine_tune[0].endswith("run_classifier.py") and "--do_train" in fine_tune and "--do_eval" in fine_tune
    assert f"--init_checkpoint={study.checkpoint('post-LN', 1)}" in fine_tune
    assert study.config("RealFormer") == {"hidden_size": 32, "layer_norm_type": "post", "residual_attention": "sum"}
    # every variant of one seed pretrains with the same flags but its config and directory
    pretraining = [r.command for r in runs if r.kind == plan.PRETRAINING and r.seed == 2]
    stripped = [[f for f in c if not f.startswith(("--bert_config_file", "--output_dir"))] for c in pretraining]
    assert stripped[0] == stripped[1] == stripped[2]


def test_a_released_baseline_fine_tunes_the_checkpoint_itself_and_analyses_it_once(tmp_path):
    task = plan.DownstreamTask.parse("sentiment=run_classifier.py --task_name=generic --data_dir=d")
    with pytest.raises(InputError, match="released_baseline fine-tunes the init_checkpoint as released"):
        dataclasses.replace(_plan(tmp_path, [task]), released_baseline=True)
    study = dataclasses.replace(_plan(tmp_path, [task], variants=("post-LN", "RealFormer")),
                                init_checkpoint="head/model.ckpt-400", released_baseline=True)
    assert study.compared == ("released", "post-LN", "RealFormer")
    released = [run for run in study.runs() if run.variant == "released"]
    assert [run.name for run in released] == ["attention released seed 1", "sentiment released seed 1",
                                              "sentiment released seed 2"]
    assert all("--init_checkpoint=head/model.ckpt-400" in run.command for run in released)
    assert study.config("released") == {"hidden_size": 32}  # the checkpoint's own config
    assert len(study.runs()) == 3 + 2 * 2 * 3
    # every continued variant starts from the checkpoint too
    assert all("--init_checkpoint=head/model.ckpt-400" in run.command for run in study.runs()
               if run.kind == plan.PRETRAINING)


def test_every_variant_is_compared_with_post_ln_and_with_the_released_checkpoint():
    points = [("released", 1, 0.80), ("released", 2, 0.82), ("post-LN", 1, 0.84), ("post-LN", 2, 0.83),
              ("RealFormer", 1, 0.85), ("RealFormer", 2, 0.87)]
    rows = [{"variant": v, "seed": s, "task": "sentiment", "metric": "test_accuracy", "value": x, "step": 90}
            for v, s, x in points]
    summary = {e["variant"]: e for e in results.aggregate(rows, ("released", "post-LN", "RealFormer"))}
    assert "difference_to_released" not in summary["released"]
    assert summary["post-LN"]["difference_to_released"]["mean"] == pytest.approx((0.04 + 0.01) / 2)
    assert summary["RealFormer"]["difference_to_released"]["mean"] == pytest.approx((0.05 + 0.05) / 2)
    assert summary["RealFormer"]["difference_to_post_ln"]["mean"] == pytest.approx((0.01 + 0.04) / 2)
    assert summary["released"]["difference_to_post_ln"]["mean"] == pytest.approx(-(0.04 + 0.01) / 2)


def test_recovery_is_the_gap_at_step_zero_and_the_first_step_back_at_post_ln_start():
    from bert_realformer.comparison.report import recovery
    curves = {("post-LN", 1): {0: 0.40, 50: 0.41, 100: 0.42}, ("post-LN", 2): {0: 0.40, 50: 0.40, 100: 0.43},
              ("RealFormer", 1): {0: 0.10, 50: 0.35, 100: 0.41}, ("RealFormer", 2): {0: 0.12, 50: 0.30, 100: 0.38}}
    rows = [_row(variant, seed, "masked_lm_accuracy", value, step)
            for (variant, seed), curve in curves.items() for step, value in curve.items()]
    post, real = recovery(rows, ("post-LN", "RealFormer"))
    assert post == {"variant": "post-LN", "start": pytest.approx(0.40), "gap": pytest.approx(0.0),
                    "recovered_at": {1: 0, 2: 0}, "caught_up_at": {1: 0, 2: 0}, "final": pytest.approx(0.425)}
    assert real["start"] == pytest.approx(0.11) and real["gap"] == pytest.approx(-0.29)
    assert real["recovered_at"] == {1: 100, 2: None} and real["final"] == pytest.approx(0.395)
    # at post-LN's accuracy of the same step: never below it, at once once ahead
    assert real["caught_up_at"] == {1: None, 2: None}
    ahead = [_row("RealFormer", 1, "masked_lm_accuracy", value, step) for step, value in ((0, 0.3), (50, 0.41))]
    assert recovery([r for r in rows if r["variant"] == "post-LN"] + ahead,
                    ("RealFormer",))[0]["caught_up_at"] == {1: 50}
    # a study from scratch has no step-0 checkpoint to recover
    assert recovery([r for r in rows if r["step"] > 0], ("post-LN", "RealFormer")) == []


@pytest.mark.parametrize("spec,message", [
    ("sentiment", "expected NAME=SCRIPT"),
    ("x=not_a_script.py --a=1", "not_a_script.py is not one of the project's scripts"),
    ("pretraining=run_classifier.py", "the name 'pretraining' is the study's own"),
])
def test_bad_task_specs_are_one_line_errors(spec, message):
    with pytest.raises(InputError, match=message):
        plan.DownstreamTask.parse(spec)


def test_unknown_variant_is_refused():
    with pytest.raises(InputError, match="unknown variant 'realformer'"):
        plan.check_variants(["post-LN", "realformer"])
    with pytest.raises(InputError, match="unknown variant 'post-LN\\+warmup'"):
        plan.check_variants(["post-LN+warmup"], 100)
    with pytest.raises(InputError, match="a \\+warmup variant needs --residual_attention_warmup_steps"):
        plan.check_variants(["RealFormer+warmup"])
    with pytest.raises(InputError, match="unknown variant 'RealFormer\\+warmupx'"):
        plan.check_variants(["RealFormer+warmupx"], 100)


def test_a_warmup_variant_is_its_realformer_continued_with_the_warm_start(tmp_path):
    """`+warmup` with the study's steps, `+warmupN` (a longer warm-up beside it) with N."""
    variants = ("post-LN", "RealFormer-mean", "RealFormer-mean+warmup", "RealFormer+warmup200")
    plan.check_variants(["RealFormer+warmup200"])  # (its steps given: no study flag needed)
    study = dataclasses.replace(_plan(tmp_path, variants=variants), init_checkpoint="head/model.ckpt-400",
                                residual_attention_warmup_steps=50)
    assert study.config("RealFormer-mean+warmup") == study.config("RealFormer-mean")
    assert study.config("RealFormer+warmup200")["residual_attention"] == "sum"
    commands = {run.variant: run.command for run in study.runs() if run.kind == plan.PRETRAINING and run.seed == 1}
    assert "--residual_attention_warmup_steps=50" in commands["RealFormer-mean+warmup"]
    assert "--residual_attention_warmup_steps=200" in commands["RealFormer+warmup200"]
    assert not any(flag.startswith("--residual_attention_warmup_steps") for variant in ("post-LN", "RealFormer-mean")
                   for flag in commands[variant])
    assert study.run_dir("RealFormer-mean+warmup", 1, "x").endswith("realformer_mean_warmup/seed-1/x")


def _fake_run(tmp_path, name, script_text):
    script = tmp_path / f"{name}.py"
    script.write_text(script_text)
    directory = tmp_path / "runs" / name
    return plan.Run(name, "post-LN", 1, "t", str(directory), (str(script), f"--out={directory}"),
                    str(directory / "done"))


def test_a_finished_run_is_reused_and_a_changed_command_is_refused(tmp_path, capsys):
    counter = tmp_path / "count"
    run = _fake_run(tmp_path, "r", f"import sys, pathlib\nc = pathlib.Path({str(counter)!r})\n"
                    "c.write_text(str(int(c.read_text() or 0) + 1) if c.exists() else '1')\n"
                    "out = pathlib.Path(sys.argv[1].split('=')[1])\n(out / 'done').write_text('ok')\n")
    assert execution.execute(run) is True
    assert execution.execute(run) is False
    assert counter.read_text() == "1"
    printed = capsys.readouterr().out
    assert f"[r] python {run.command[0]} --out=" in printed and "[r] done already" in printed
    changed = plan.Run(run.name, run.variant, run.seed, run.kind, run.directory, (*run.command, "--x=2"),
                       run.done_marker)
    with pytest.raises(InputError, match="holds a run made with other flags"):
        execution.execute(changed)
    assert "done already" not in capsys.readouterr().out  # (refused: not said to be done)


def test_a_failing_run_names_itself_its_error_and_its_log(tmp_path):
    run = _fake_run(tmp_path, "bad",
                    "import sys\nprint('working')\nsys.exit('error: --data_dir=x: no such directory')\n")
    with pytest.raises(execution.RunFailed, match=r"\[bad\] failed \(exit 1\): error: --data_dir=x: no such "
                       r"directory \(log: .*log.txt\)"):
        execution.execute(run)
    assert "working" in (tmp_path / "runs" / "bad" / "log.txt").read_text()
    assert not os.path.exists(run.done_marker)


def test_eval_history_keeps_one_point_per_step(tmp_path):
    history = EvalHistory(str(tmp_path))
    for step in (5, 10, 15):
        history.add(step, {"masked_lm_accuracy": step / 100, "global_step": step})
    history.resume_at(10)             # a run resumed at step 10: the point at 15 goes
    history.add(10, {"masked_lm_accuracy": 0.5})
    assert [(p["step"], p["masked_lm_accuracy"]) for p in read_history(str(tmp_path / "eval_history.jsonl"))] == \
        [(5, 0.05), (10, 0.5)]
    assert os.listdir(tmp_path / "eval")  # TensorBoard events
    due = PeriodicEval(5, None)
    assert [s for s in range(0, 13) if due.due(s, 12)] == [0, 5, 10, 12]
    assert (due.next_due(0, 12), due.next_due(10, 12)) == (5, 12)


def test_the_evaluation_at_the_last_step_is_not_run_again_for_do_eval():
    steps = []

    def evaluate(step):
        steps.append(step)
        return {"loss": step / 10, "global_step": step}
    held_out = once_per_step(evaluate)
    results = [held_out(step) for step in (0, 5, 12, 12)]  # the periodic points, then --do_eval's
    assert steps == [0, 5, 12]
    assert results[3] == results[2] == {"loss": 1.2, "global_step": 12}
    results[3]["loss"] = 0.0  # (each answer a copy: a caller's change reaches no later one)
    assert held_out(12)["loss"] == 1.2
    held_out(5)  # only the last step's result is kept
    assert steps == [0, 5, 12, 5]


def test_a_damaged_eval_history_names_its_line(tmp_path):
    path = tmp_path / "eval_history.jsonl"
    path.write_text('{"step": 5, "loss": 1.0}\n{"step": 10, "loss"\n')
    with pytest.raises(InputError, match=r"eval_history.jsonl:2: expected a JSON object with a step"):
        read_history(str(path))


def test_collect_reads_every_kind_of_run(tmp_path):
    task = plan.DownstreamTask.parse("sentiment=run_classifier.py --task_name=thucnews")
    study = _plan(tmp_path, [task], variants=("post-LN",), seeds=(1,))
    pretraining, attention, sentiment = study.runs()
    os.makedirs(pretraining.directory)
    with open(os.path.join(pretraining.directory, "eval_history.jsonl"), "w") as f:
        f.write('{"step": 50, "masked_lm_accuracy": 0.1}\n{"step": 100, "masked_lm_accuracy": 0.2}\n')
    with open(pretraining.done_marker, "w") as f:
        f.write("masked_lm_accuracy = 0.2\nglobal_step = 100\n")
    os.makedirs(attention.directory)
    head = {"quantiles": {"0.5": 1.0}}
    stats = {"entropy": [[head, {"quantiles": {"0.5": 3.0}}]], "jsd_adjacent": [[{"quantiles": {"0.5": 0.25}}] * 2]}
    with open(attention.done_marker, "w") as f:
        json.dump(stats, f)
    # the sentiment run never finished: left out
    rows = results.collect(study)
    assert {(r["task"], r["metric"], r["step"], r["value"]) for r in rows} == {
        ("pretraining", "masked_lm_accuracy", 50, 0.1), ("pretraining", "masked_lm_accuracy", 100, 0.2),
        ("attention", "entropy_median", 100, 2.0), ("attention", "adjacent_jsd_median", 100, 0.25)}
    assert not os.path.exists(sentiment.done_marker)


def test_stuck_fine_tuning_runs_are_named_not_taken_for_metrics(tmp_path):
    """eval_results.txt's run keys (seed after restarts, restarts) are no metrics; `stuck_runs`
    lists the runs whose training_options.json records restarts or a stuck verdict, and the
    report says which they were: stuck to the end, or found stuck and left chance later."""
    from bert_realformer.comparison.report import stuck_line
    task = plan.DownstreamTask.parse("sentiment=run_classifier.py --task_name=thucnews")
    study = _plan(tmp_path, [task], variants=("post-LN", "RealFormer"), seeds=(1, 2))
    results_of = {("post-LN", 1): "eval_accuracy = 0.8\nglobal_step = 10\n",
                  ("RealFormer", 1): "eval_accuracy = 0.81\nglobal_step = 10\nrestarts = 1\nseed = 2\n",
                  ("post-LN", 2): "eval_accuracy = 0.5\nglobal_step = 10\nrestarts = 3\nseed = 5\n",
                  ("RealFormer", 2): "eval_accuracy = 0.5\nglobal_step = 10\n"}

    def record(seed, restarted, stuck_at=None, left_at=None):
        stuck = stuck_at and {"step": stuck_at, "reason": "..."}
        if left_at:
            stuck.update(left_at_step=left_at, left_reason="...")
        return {"seed": seed, "restarts": [{"seed": s, "step": 3, "reason": "..."} for s in restarted],
                "stuck": stuck}
    records = {("post-LN", 1): record(1, []), ("RealFormer", 1): record(2, [1]),
               ("post-LN", 2): record(5, [2, 3, 4], stuck_at=6),
               ("RealFormer", 2): record(2, [], stuck_at=7, left_at=9)}
    for run in study.runs():
        if run.kind == "sentiment":
            os.makedirs(run.directory)
            with open(run.done_marker, "w") as f:
                f.write(results_of[run.variant, run.seed])
            with open(os.path.join(run.directory, "training_options.json"), "w") as f:
                json.dump(records[run.variant, run.seed], f)
    assert {r["metric"] for r in results.collect(study)} == {"eval_accuracy"}
    stuck = results.stuck_runs(study)
    assert [{**run, "task": None} for run in stuck] == [
        {"task": None, "variant": "RealFormer", "seed": 1, "restarts": 1, "final_seed": 2, "stuck_at_step": None,
         "left_at_step": None},
        {"task": None, "variant": "post-LN", "seed": 2, "restarts": 3, "final_seed": 5, "stuck_at_step": 6,
         "left_at_step": None},
        {"task": None, "variant": "RealFormer", "seed": 2, "restarts": 0, "final_seed": 2, "stuck_at_step": 7,
         "left_at_step": 9}]
    assert {run["task"] for run in stuck} == {"sentiment"}
    assert stuck_line(stuck, "sentiment") == (
        "Stuck runs (a training loss at chance, `warning: this run looks stuck` in the run's log): RealFormer seed 1 "
        "restarted once (`--on_stuck=restart`; ended with `--seed=2`); post-LN seed 2 restarted 3 times "
        "(`--on_stuck=restart`; ended with `--seed=5`), then stayed stuck from step 6: its numbers above are a model "
        "that learned nothing; RealFormer seed 2 was found stuck at step 7 and left chance by step 9: its numbers "
        "above are a model that learned late.")
    assert stuck_line(stuck, "word_class").startswith("No run was found stuck")


def test_peoples_daily_articles_group_paragraphs_under_their_headlines(real_data):
    articles = real_data.peoples_daily_articles()
    assert sum(len(a) for a in articles) == len(real_data.peoples_daily_lines())
    assert len(articles) > 3000
    first = articles[0]
    assert first[0].startswith("迈向充满希望的新世纪") and first[-1] == "谢谢！（新华社北京１２月３１日电）"
    assert articles[1][0] == "在十五大精神指引下胜利前进——元旦献辞"
    # a title and its subtitle open one article; photo credits stay inside theirs
    concert = next(a for a in articles if a[0] == "北京举行新年音乐会")
    assert concert[1].startswith("江泽民李鹏乔石") and "（新华社记者樊如钧摄）" in concert


def test_the_word_class_task_has_many_human_labelled_classes(real_data):
    from bert_realformer.realdata.word_classes import word_class_splits
    splits = word_class_splits()
    labels = {label for label, _, _ in splits["train"]}
    assert len(labels) >= 20 and "w" not in labels and {"n", "v", "vn", "nr", "Ng"} <= labels
    assert {label for label, _, _ in splits["dev"]} == labels
    for _, word, context in splits["train"][:200]:
        assert word in context and len(context) <= len(word) + 48
    contexts = {split: {c for _, _, c in rows} for split, rows in splits.items()}
    # split by sentence: only sentences the paper printed more than once are in both
    assert len(contexts["train"] & contexts["test"]) < 0.02 * len(contexts["test"])
    assert splits == word_class_splits()  # deterministic


def test_run_study_refuses_bad_flags_in_one_line(tmp_path):
    from helpers.in_process import completed_in_process
    config = tmp_path / "c.json"
    config.write_text("{}")
    result = completed_in_process("run_study.py", f"--output_dir={tmp_path}/o", f"--bert_config_file={config}",
                                  f"--vocab_file={config}", "--input_file=x", "--eval_input_file=y", "--seeds=1,two")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "error: --seeds=1,two: expected integers, e.g. --seeds=1,2,3"


def test_one_seed_gives_every_variant_the_same_initial_weights(tmp_path):
    """Seeds pair across variants: the Driver seeded alike builds post-LN, pre-LN and RealFormer
    with equal values for every weight they share (pre-LN's LayerNorms, placed and named
    otherwise, start at ones and zeros), and another seed gives other values."""
    import numpy as np
    import tensorflow as tf

    import modeling
    from bert_realformer.training.driver import Driver, RunOptions

    def weights(variant, seed):
        config = modeling.BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16, **plan.variant_keys(variant))
        driver = Driver(tf.distribute.get_strategy(), lambda: modeling.BertPretrainer(config),
                        RunOptions(seed_globally=True, output_dir=str(tmp_path / f"{variant}-{seed}"), seed=seed))
        return {k: v.numpy() for k, v in modeling.tf1_variable_map(driver.model).items()}

    post = weights("post-LN", 3)
    for variant in ("pre-LN", "RealFormer"):
        other = weights(variant, 3)
        shared = set(post) & set(other)
        assert {k for k in post if "LayerNorm" not in k} <= shared  # (pre-LN's LayerNorms sit elsewhere)
        assert all(np.array_equal(post[k], other[k]) for k in shared), variant
    reseeded = weights("post-LN", 4)
    assert not np.array_equal(post["bert/embeddings/word_embeddings"], reseeded["bert/embeddings/word_embeddings"])


def test_a_runs_output_is_streamed_to_its_log_and_its_progress_shown(tmp_path, capsys):
    """While a run works, its log.txt already holds what it printed and the study shows its
    progress lines; a run killed mid-way leaves that log."""
    import signal
    import threading
    import time
    pid_file = tmp_path / "pid"
    run = _fake_run(tmp_path, "slow", "import os, sys, time\n"
                    f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                    "print('weights: freshly initialised', file=sys.stderr, flush=True)\n"
                    "print('step 1/4: loss 2.5000, 3.00 steps/s, ETA 0m01s', file=sys.stderr, flush=True)\n"
                    "time.sleep(60)\n")
    outcome = {}

    def execute():
        try:
            execution.execute(run)
        except execution.RunFailed as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=execute)
    thread.start()
    log = tmp_path / "runs" / "slow" / "log.txt"
    deadline = time.time() + 60
    while time.time() < deadline and not (log.exists() and "step 1/4" in log.read_text()):
        time.sleep(0.1)
    assert "weights: freshly initialised\nstep 1/4: loss 2.5000" in log.read_text()  # before the run ends
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    thread.join(timeout=60)
    assert outcome["error"].startswith("[slow] failed (exit -9)")
    assert "step 1/4" in log.read_text()
    assert "[slow] step 1/4: loss 2.5000, 3.00 steps/s, ETA 0m01s" in capsys.readouterr().out


def test_a_stopped_study_logs_its_runs_last_words(tmp_path):
    """The study stopped (SIGTERM) while a run works: the run is stopped too, and what it prints
    as it stops (what it kept) still reaches its log.txt."""
    import signal
    import time
    pid_file = tmp_path / "pid"
    run = _fake_run(tmp_path, "slow", "import os, signal, sys, time\n"
                    "def stop(*_):\n"
                    "    print('stopped at step 1: the training state is kept', file=sys.stderr, flush=True)\n"
                    "    sys.exit(143)\n"
                    "signal.signal(signal.SIGTERM, stop)\n"
                    f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                    "print('step 1/4: loss 2.5000', file=sys.stderr, flush=True)\n"
                    "time.sleep(60)\n")
    study = (f"import signal, sys; sys.path[:0] = {sys.path!r}\n"
             "from bert_realformer.comparison import execution, plan\n"
             "def stop(*_):\n"
             "    raise KeyboardInterrupt\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             f"execution.execute(plan.Run(*{dataclasses.astuple(run)!r}))\n")
    proc = script_processes.Popen([sys.executable, "-c", study], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    log = tmp_path / "runs" / "slow" / "log.txt"
    deadline = time.time() + 60
    while time.time() < deadline and not (log.exists() and "step 1/4" in log.read_text()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert log.read_text().splitlines()[-1] == "stopped at step 1: the training state is kept"


def test_the_study_says_which_run_of_how_many_and_the_time_left_by_kind():
    """The time left: each run still to do costs the mean of its kind's finished runs; unknown
    until every kind still to come has finished once; runs finished before are not counted."""
    from bert_realformer.comparison.study_progress import StudyProgress
    now = [0.0]
    kinds = ["pretraining", "attention", "sentiment"] * 3
    progress = StudyProgress(kinds, clock=lambda: now[0])
    to_do = [True] * 9
    assert progress.line(0, "pretrain post-LN seed 1", to_do) == (
        "[study] run 1 of 9: pretrain post-LN seed 1 (0m00s so far, the time left is known once a run of each kind "
        "has finished)")
    for kind, seconds in (("pretraining", 300), ("attention", 20), ("sentiment", 100)):
        now[0] += seconds
        progress.finished(kind, seconds)
    now[0] += 5
    to_do[:3] = [False] * 3
    to_do[6] = False  # (the third variant's pretraining finished in an earlier study run)
    # left: attention, sentiment of variant 3 and the whole variant 2: 300 + 2 * 20 + 2 * 100
    assert progress.line(3, "pretrain pre-LN seed 1", to_do) == (
        "[study] run 4 of 9: pretrain pre-LN seed 1 (7m05s so far, about 9m00s left)")
    progress.finished("pretraining", 500)  # the mean of a kind: (300 + 500) / 2, then 400 + 240
    assert progress.line(3, "pretrain pre-LN seed 1", to_do).endswith("about 10m40s left)")


def test_the_report_names_the_variants_still_at_the_unigram_stage():
    """Mean held-out MLM accuracy at the last step against the unigram baseline 0.0521 (the demo's
    data) with a margin of 0.003: 0.0521 and 0.0540 are at it, 0.0560 and 0.0681 past it."""
    from bert_realformer.comparison.report import unigram_stage_line

    def rows(**means):
        return [{"task": "pretraining", "metric": "masked_lm_accuracy", "variant": variant, "mean": mean, "n": 1}
                for variant, mean in means.items()]
    variants = ("post-LN", "pre-LN", "RealFormer")
    assert unigram_stage_line(rows(**{"post-LN": 0.0521, "pre-LN": 0.0540, "RealFormer": 0.0521}), variants,
                              0.0521, 141) == (
        "**No variant has left the unigram stage**: held-out MLM accuracy after 141 steps within 0.003 of the "
        "unigram baseline (0.0521) for each, so these models have learnt word frequencies only and the tables "
        "below compare nothing of the variants; pretrain longer.")
    assert unigram_stage_line(rows(**{"post-LN": 0.0620, "pre-LN": 0.0613, "RealFormer": 0.0521}), variants,
                              0.0521, 416) == (
        "**RealFormer has not left the unigram stage**: held-out MLM accuracy after 416 steps within 0.003 of "
        "the unigram baseline (0.0521), so its rows below are a model that has learnt word frequencies only.")
    assert unigram_stage_line(rows(**{"post-LN": 0.0530, "pre-LN": 0.0560, "RealFormer": 0.0521}), variants,
                              0.0521, 300).startswith("**post-LN and RealFormer have not left the unigram stage**")
    assert unigram_stage_line(rows(**{"post-LN": 0.0681, "pre-LN": 0.0677, "RealFormer": 0.0747}), variants,
                              0.0521, 506) is None
    assert unigram_stage_line(rows(**{"post-LN": 0.0521}), variants, None, 100) is None  # no baseline known


def test_a_budget_cuts_the_epochs_first_then_the_pretraining_steps():
    """The estimate and the shares by hand: 3 pretraining runs of 600 steps at 1.43 steps/s (the
    demo on an AVX2-only AMD EPYC Zen 3 with TensorFlow's own kernels), 12 processes starting in
    20 s each: 3 * 600 / 1.43 * 2.2 = 2769 s of work, 1662 s the pretraining's (0.6), 1108 s the
    tasks'; of each 83 s (0.03 of the work) its factor does not shrink (evaluations, reading the
    tasks' data), so 1579 s and 1025 s are scaled; 240 s of start-ups."""
    from bert_realformer.comparison import sizing
    assert sizing.UNSCALED_SHARE == 0.03
    work = 3 * 600 / 1.43 * sizing.WORK_PER_PRETRAINING_STEP
    starts = 12 * 20
    pretraining, finetuning, fixed = 0.57 * work, 0.37 * work, starts + 0.06 * work
    assert sizing.estimate_minutes(1.43, 20, 600, 3, 12) == pytest.approx((work + starts) / 60)
    assert sizing.factors_for(60, 1.43, 20, 600, 3, 12) == (1.0, 1.0)  # it fits: as asked
    # 45 minutes: the whole pretraining, the epochs that fit what is left of it
    assert sizing.factors_for(45, 1.43, 20, 600, 3, 12) == pytest.approx(
        (1.0, (45 * 60 - fixed - pretraining) / finetuning))
    # 25: half the epochs (the floor), the pretraining steps that fit what is left
    steps, epochs = sizing.factors_for(25, 1.43, 20, 600, 3, 12)
    assert epochs == sizing.FINETUNING_FLOOR == 0.5
    assert steps == pytest.approx((25 * 60 - fixed - 0.5 * finetuning) / pretraining) and 0.35 < steps < 0.4
    # minutes spent before the first run (the data prepared, the probe) come off the budget
    assert sizing.factors_for(25, 1.43, 20, 600, 3, 12, spent_minutes=2)[0] == pytest.approx(
        (23 * 60 - fixed - 0.5 * finetuning) / pretraining)
    # 15: under a tenth of the pretraining, so a tenth and the epochs cut below half (never under a tenth)
    assert sizing.factors_for(15, 1.43, 20, 600, 3, 12) == pytest.approx(
        (0.1, (15 * 60 - fixed - 0.1 * pretraining) / finetuning))
    assert sizing.factors_for(1, 1.43, 20, 600, 3, 12) == (0.1, 0.1)
    assert sizing.factors_for(20, 1.43, 20, 600, 3, 12, spent_minutes=21) == (0.1, 0.1)

    sized = sizing.Sizing(factor=0.3, finetuning_factor=0.5, steps_per_second=1.43, start_seconds=20,
                          estimated_minutes=46.5, budget_minutes=15)
    assert sized.scaled_steps(600) == 180 and sized.scaled_steps(60) == 18 and sized.scaled_steps(2) == 1
    def task(*flags):
        return plan.DownstreamTask("t", "run_classifier.py", flags)
    assert sized.scaled_task(task("--num_train_epochs=2", "--task_name=x")).flags == (
        "--task_name=x", "--num_train_epochs=1")
    assert sized.scaled_task(task("--task_name=x")).flags == ("--task_name=x", "--num_train_epochs=1.5")
    steps_only = dataclasses.replace(sized, finetuning_factor=1.0)
    assert steps_only.scaled_task(task("--num_train_epochs=2")).flags == ("--num_train_epochs=2",)
    assert steps_only.shrunk and not dataclasses.replace(sized, factor=1.0, finetuning_factor=1.0).shrunk
    assert sized.scaled_steps(0) == 0
    # a sizing recorded with one factor for both
    assert sizing.Sizing(factor=0.3, steps_per_second=1, start_seconds=1, estimated_minutes=1,
                         budget_minutes=1).finetuning_factor == 0.3
    assert sized.line(600) == (
        "[study] this CPU runs the pretraining step at 1.43 steps/s: the study as asked takes about 46 minutes, "
        "over the budget of 15, so it runs 0.50 of each task's epochs and pretraining for 180 of 600 steps; with "
        "fewer steps its models may not leave the unigram stage: report.md says whether they did")
    assert dataclasses.replace(sized, spent_minutes=1.23).line(600) == (
        "[study] this CPU runs the pretraining step at 1.43 steps/s: the study as asked takes about 46 minutes, "
        "over the budget of 15 (1.2 of it spent before the first run), so it runs 0.50 of each task's epochs and "
        "pretraining for 180 of 600 steps; with fewer steps its models may not leave the unigram stage: report.md "
        "says whether they did")
    # the epochs alone cut: the pretraining as asked, no word of the unigram stage
    assert dataclasses.replace(sized, factor=1.0).line(600).endswith("0.50 of each task's epochs and pretraining "
                                                                      "for 600 of 600 steps")
    lines = ["step 1/20: loss 9.1 (masked_lm_loss 8.4)", "step 20/20: loss 8.0 (masked_lm_loss 7.4), 8.53 steps/s, "
             "272.8 examples/s"]
    assert sizing.rate_from_output(lines) == 8.53
    with pytest.raises(InputError, match="printed no progress line"):
        sizing.rate_from_output(lines[:1])


def test_each_restarting_task_run_must_end_before_the_runs_after_it(tmp_path):
    """The deadlines by hand: 100 pretraining steps at 2 steps/s make a variant's expected work
    100 s (x 2.0, the estimate without its margin): 60 s its pretraining (0.6), 20 s each of its
    two tasks, 3 s of each side whatever its factor; every run starts in 10 s."""
    from bert_realformer.comparison import sizing
    sized = sizing.Sizing(factor=1.0, steps_per_second=2.0, start_seconds=10, estimated_minutes=5,
                          budget_minutes=15, budget_ends_at=10000)
    tasks = [plan.DownstreamTask("a", "run_classifier.py", ("--on_stuck=restart",)),
             plan.DownstreamTask("b", "run_classifier.py", ())]
    study = _plan(tmp_path, tasks, variants=("post-LN", "RealFormer"), seeds=(1,))
    deadlines = sizing.restart_deadlines(sized, study.runs(), 100, 2)
    assert sized.variant_seconds(100) == pytest.approx((60, 40))
    assert deadlines == pytest.approx({"b RealFormer seed 1": 10000, "a RealFormer seed 1": 10000 - 30,
                                       "b post-LN seed 1": 10000 - 30 * 2 - 10 - 70,
                                       "a post-LN seed 1": 10000 - 30 * 3 - 10 - 70})
    # as sized: 0.5 of the pretraining steps, 0.25 of the epochs
    assert dataclasses.replace(sized, factor=0.5, finetuning_factor=0.25).variant_seconds(100) == pytest.approx(
        (3 + 57 * 0.5, 3 + 37 * 0.25))
    study.restart_deadlines = deadlines
    commands = {run.name: run.command for run in study.runs()}
    assert "--restart_deadline=9830" in commands["a post-LN seed 1"]
    assert "--restart_deadline=9970" in commands["a RealFormer seed 1"]
    # a task that does not restart, or that sets its own deadline, is left as it is
    assert not any(word.startswith("--restart_deadline") for word in commands["b post-LN seed 1"])
    own = plan.DownstreamTask("a", "run_classifier.py", ("--on_stuck=restart", "--restart_deadline=5"))
    study.tasks = [own]
    assert [w for w in study.runs()[2].command if w.startswith("--restart_deadline")] == ["--restart_deadline=5"]
    # a sizing recorded before the budget's end was: no deadlines (its runs' commands as they were)
    assert sizing.restart_deadlines(dataclasses.replace(sized, budget_ends_at=0.0), study.runs(), 100, 2) == {}


def test_a_sizing_is_recorded_and_kept(tmp_path):
    from bert_realformer.comparison import sizing
    assert sizing.recorded(str(tmp_path)) is None
    sized = sizing.Sizing(factor=0.3, steps_per_second=1.43, start_seconds=20, estimated_minutes=46.5,
                          budget_minutes=15)
    sizing.record(sized, "ram://study-sizing")  # (any file system the study's directory may be on)
    assert sizing.recorded("ram://study-sizing") == sized
