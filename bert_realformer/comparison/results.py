"""A study's numbers: every run's metrics read back from its directory, and their aggregation
per variant over seeds (`OUTPUT_DIR/results.json`).

    rows = collect(plan)                    # [{"variant", "seed", "task", "metric", "value", "step"}]
    summary = aggregate(rows, plan.compared)

Rows: held-out pretraining metrics at every evaluated step (`eval_history.jsonl`); attention
statistics (`entropy_median`, `adjacent_jsd_median`: the mean over layers and heads of each
head's median per-token entropy, and over adjacent layer pairs of the median JSD); every
number a downstream run's `eval_results.txt` holds (and, for a classifier that predicts its
test split, `test_accuracy` and `test_macro_f1`: `test_scores`), per-class figures and what it says about
the run itself (its seed after restarts, `restarts`: `stuck_runs`) left out.
Aggregates use each run's last step.
"""

import json
import os

import numpy as np

from bert_realformer import storage
from bert_realformer.comparison.plan import (
    ATTENTION,
    BASELINE_VARIANT,
    PRETRAINING,
    RELEASED,
    DownstreamTask,
    StudyPlan,
)
from bert_realformer.comparison.statistics import paired_difference, summary
from bert_realformer.errors import InputError
from bert_realformer.tasks.outputs import TEST_RESULTS
from bert_realformer.text_files import read_text
from bert_realformer.training.evaluation import FILE_NAME as HISTORY_FILE
from bert_realformer.training.evaluation import read_history

# What a fine-tuning run's eval_results.txt says about the run, not about the model.
RUN_KEYS = ("seed", "restarts")


def _key_values(path):
    values = {}
    for line in read_text(path).splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            try:
                values[key] = float(value)
            except ValueError:
                pass  # (a confusion matrix)
    return values


def attention_summary(stats: dict) -> dict:
    """The two attention numbers of one `attention_stats.json`."""
    entropy = [head["quantiles"]["0.5"] for layer in stats["entropy"] for head in layer]
    result = {"entropy_median": float(np.mean(entropy))}
    if stats.get("jsd_adjacent"):
        jsd = [head["quantiles"]["0.5"] for layer in stats["jsd_adjacent"] for head in layer]
        result["adjacent_jsd_median"] = float(np.mean(jsd))
    return result


def test_scores(task: DownstreamTask, directory: str) -> dict:
    """{"test_accuracy", "test_macro_f1"} of a run_classifier.py run's test predictions
    (`test_results.tsv`, made with the checkpoint best on dev) against its test split's labels;
    {} for a run without them."""
    from bert_realformer.comparison.baselines import classification_processor, predicts_test
    path = os.path.join(directory, TEST_RESULTS)
    if task.script != "run_classifier.py" or not predicts_test(task) or not storage.exists(path):
        return {}
    from bert_realformer.tasks.classification.metrics import classification_metrics
    processor = classification_processor(task)
    labels = processor.get_labels()
    index = {label: i for i, label in enumerate(labels)}
    truth = [index[e.label] for e in processor.get_test_examples(task.flag("data_dir"))]
    rows = [line.split("\t") for line in read_text(path).splitlines() if line.strip()]
    if len(rows) != len(truth):
        raise InputError(f"{path}: {len(rows)} predictions for {len(truth)} test examples")
    predicted = np.argmax(np.array(rows, dtype=np.float64), axis=1)
    scores = classification_metrics(truth, predicted, len(labels))
    return {"test_accuracy": scores["accuracy"], "test_macro_f1": scores["macro_f1"]}


def collect(plan: StudyPlan) -> list[dict]:
    """The rows of every finished run of the plan (unfinished runs are left out)."""
    rows = []
    tasks = {task.name: task for task in plan.tasks}
    for run in plan.runs():
        if not storage.exists(run.done_marker):
            continue

        def add(metric, value, step, run=run):
            rows.append({"variant": run.variant, "seed": run.seed, "task": run.kind, "metric": metric,
                         "value": float(value), "step": int(step)})

        if run.kind == PRETRAINING:
            history = read_history(os.path.join(run.directory, HISTORY_FILE))
            for point in history:
                for metric, value in sorted(point.items()):
                    if metric != "step":
                        add(metric, value, point["step"])
            if not history:
                final = _key_values(run.done_marker)
                for metric, value in sorted(final.items()):
                    if metric != "global_step":
                        add(metric, value, final.get("global_step", plan.num_train_steps))
        elif run.kind == ATTENTION:
            stats = json.loads(read_text(run.done_marker))
            for metric, value in attention_summary(stats).items():
                add(metric, value, plan.num_train_steps)
        else:
            values = {**_key_values(run.done_marker), **test_scores(tasks[run.kind], run.directory)}
            for metric, value in sorted(values.items()):
                if metric != "global_step" and metric not in RUN_KEYS and not metric.startswith("class_"):
                    add(metric, value, values.get("global_step", 0))
    return rows


def stuck_runs(plan: StudyPlan) -> list[dict]:
    """The finished fine-tuning runs that were stuck (`finetuning.stuck`), in the plan's order:
    {"task", "variant", "seed", "restarts": times it started again (`--on_stuck=restart`),
    "final_seed": the seed it ended with, "stuck_at_step": where its last start was still found
    stuck, else None, "left_at_step": where that start left chance after all (its numbers are a
    model that learned late), else None (with "stuck_at_step": a stuck model's numbers)}, as each
    run's training_options.json records them."""
    from bert_realformer.training import recorded_options  # (here: it loads TensorFlow)
    found = []
    for run in plan.runs():
        if run.kind in (PRETRAINING, ATTENTION) or not storage.exists(run.done_marker):
            continue
        record = recorded_options.read(run.directory)
        restarts, stuck = len(record.get("restarts") or []), record.get("stuck")
        if restarts or stuck:
            found.append({"task": run.kind, "variant": run.variant, "seed": run.seed, "restarts": restarts,
                          "final_seed": int(record.get("seed", run.seed)),
                          "stuck_at_step": int(stuck["step"]) if stuck else None,
                          "left_at_step": int(stuck["left_at_step"]) if stuck and "left_at_step" in stuck else None})
    return found


def final_values(rows: list[dict]) -> dict:
    """{(task, metric, variant): {seed: value at the run's last step}}."""
    last = {}
    for row in rows:
        key = (row["task"], row["metric"], row["variant"], row["seed"])
        if key not in last or row["step"] >= last[key]["step"]:
            last[key] = row
    values = {}
    for (task, metric, variant, seed), row in last.items():
        values.setdefault((task, metric, variant), {})[seed] = row["value"]
    return values


# The references every other variant is compared with, paired by seed: {variant: summary key}.
REFERENCES = ((BASELINE_VARIANT, "difference_to_post_ln"), (RELEASED, "difference_to_released"))


def aggregate(rows: list[dict], variants) -> list[dict]:
    """Per task, metric and variant: mean, std and n over seeds, and the paired difference to
    post-LN (variants other than post-LN) and to `released` (where the study has it: variants
    other than released) over the seeds both have, with its 95% CI."""
    values = final_values(rows)
    order = {v: i for i, v in enumerate(variants)}
    result = []
    for (task, metric, variant), by_seed in sorted(values.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                                   order.get(kv[0][2], 99))):
        entry = {"task": task, "metric": metric, "variant": variant,
                 **summary([by_seed[s] for s in sorted(by_seed)])}
        for reference, key in REFERENCES:
            baseline = values.get((task, metric, reference))
            if variant != reference and baseline:
                entry[key] = paired_difference(by_seed, baseline)
        result.append(entry)
    return result


def write_results(plan: StudyPlan, rows, summary_rows, baselines, path, stuck: list[dict] = ()) -> None:
    """results.json; `stuck`: `stuck_runs(plan)`."""
    data = {"variants": list(plan.compared), "seeds": list(plan.seeds), "config": plan.base_config,
            "num_train_steps": plan.num_train_steps, "baselines": baselines, "summary": summary_rows,
            "runs": rows, "stuck_runs": list(stuck)}
    storage.write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
