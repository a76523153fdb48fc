"""`OUTPUT_DIR/report.md` and its plots: the study's tables in the paper's format (mean +- std
over seeds), paired differences to post-LN with 95% confidence intervals, the baselines, and

* `mlm_accuracy.png`: held-out MLM accuracy against the step, mean and min-max band per variant;
* `attention_entropy.png`: per variant and layer, each head's median per-token entropy (heads
  sorted within a layer, then averaged rank by rank over seeds, since a head's index means
  nothing across seeds), coloured by that median, as the RealFormer paper's Figs. 6-8;
* `attention_jsd.png`: per variant, the median JSD between the same head of adjacent layers,
  sorted and averaged the same way, as its Figs. 9-10.
"""

import json
import os

import numpy as np

from bert_realformer import optional, storage
from bert_realformer.comparison.plan import ATTENTION, BASELINE_VARIANT, PRETRAINING, StudyPlan
from bert_realformer.comparison.results import REFERENCES
from bert_realformer.text_files import read_text

# What the tables show, in order: (task or None for every downstream task, metric, heading).
PRETRAINING_COLUMNS = (("masked_lm_accuracy", "MLM accuracy"), ("masked_lm_loss", "MLM loss"),
                       ("next_sentence_accuracy", "NSP accuracy"))
DOWNSTREAM_COLUMNS = (("eval_accuracy", "dev accuracy"), ("macro_f1", "dev macro-F1"),
                      ("test_accuracy", "test accuracy"), ("test_macro_f1", "test macro-F1"))
ATTENTION_COLUMNS = (("entropy_median", "median attention entropy (nats)"),
                     ("adjacent_jsd_median", "median adjacent-layer JSD (nats)"))
# A model at the unigram stage predicts the most frequent masked token everywhere and scores the
# baseline itself; one past it gains more than this by its next evaluation (the demo's models:
# 0.0521 to 0.062-0.075 within 100-200 steps of leaving it).
UNIGRAM_MARGIN = 0.003


def _entry(summary_rows, task, metric, variant):
    return next((e for e in summary_rows if (e["task"], e["metric"], e["variant"]) == (task, metric, variant)), None)


def mean_std(entry, digits=4):
    if entry is None:
        return "-"
    if entry["n"] == 1:
        return f"{entry['mean']:.{digits}f}"
    return f"{entry['mean']:.{digits}f} ± {entry['std']:.{digits}f}"


def difference(entry, digits=4, key="difference_to_post_ln"):
    diff = entry and entry.get(key)
    if not diff:
        return "-"
    text = f"{diff['mean']:+.{digits}f}"
    if diff["ci95"]:
        low, high = diff["ci95"]
        verdict = "within noise" if low <= 0 <= high else ("higher" if low > 0 else "lower")
        text += f" [{low:+.{digits}f}, {high:+.{digits}f}] {verdict}"
    return text


def _table(summary_rows, variants, task, columns, baselines=None):
    lines = ["| variant | " + " | ".join(h for _, h in columns) + " |",
             "| --- |" + " --- |" * len(columns)]
    for variant in variants:
        lines.append(f"| {variant} | " + " | ".join(mean_std(_entry(summary_rows, task, m, variant))
                                                   for m, _ in columns) + " |")
    if baselines:
        lines.append("| *baseline (no model)* | " + " | ".join(
            f"{baselines[m]:.4f}" if m in baselines else "-" for m, _ in columns) + " |")
    return lines


def _differences(summary_rows, variants, task, columns):
    """A table of paired differences per reference the study has (post-LN; `released`)."""
    lines = []
    for reference, key in REFERENCES:
        others = [v for v in variants if v != reference]
        if not others or reference not in variants:
            continue
        rows = [[difference(_entry(summary_rows, task, m, variant), key=key) for m, _ in columns] for variant in others]
        if all(cell == "-" for row in rows for cell in row):
            continue
        lines += [*([""] if lines else []), f"| variant − {reference} | " + " | ".join(h for _, h in columns) + " |",
                  "| --- |" + " --- |" * len(columns)]
        lines += [f"| {variant} | " + " | ".join(row) + " |" for variant, row in zip(others, rows)]
    return lines


def recovery(rows, variants, metric="masked_lm_accuracy") -> list[dict]:
    """Per continued variant, how it starts from the released checkpoint and how it recovers:
    {"variant", "start": mean `metric` at step 0 over seeds, "gap": start - post-LN's start,
    "recovered_at": per seed, the first evaluated step whose `metric` reaches post-LN's step-0
    mean (None: not within the run), "caught_up_at": per seed, the first evaluated step whose
    `metric` reaches post-LN's of the same seed at the same step (None: not within the run),
    "final": the mean at the last step}. Empty without post-LN or step-0 points (a study from
    scratch starts from nothing to recover)."""
    curves = {}
    for row in rows:
        if (row["task"], row["metric"]) == (PRETRAINING, metric):
            curves.setdefault(row["variant"], {}).setdefault(row["seed"], {})[row["step"]] = row["value"]
    reference = curves.get(BASELINE_VARIANT)
    if not reference or not all(0 in curve for curve in reference.values()):
        return []
    target = float(np.mean([curve[0] for curve in reference.values()]))
    found = []
    for variant in variants:
        by_seed = curves.get(variant)
        if not by_seed or not all(0 in curve for curve in by_seed.values()):
            continue
        start = float(np.mean([curve[0] for curve in by_seed.values()]))
        recovered = {seed: next((step for step in sorted(curve) if curve[step] >= target), None)
                     for seed, curve in sorted(by_seed.items())}
        caught_up = {seed: next((step for step in sorted(curve) if step in reference.get(seed, {})
                                 and curve[step] >= reference[seed][step]), None)
                     for seed, curve in sorted(by_seed.items())}
        final = float(np.mean([curve[max(curve)] for curve in by_seed.values()]))
        found.append({"variant": variant, "start": start, "gap": start - target, "recovered_at": recovered,
                      "caught_up_at": caught_up, "final": final})
    return found


def _recovery_table(found, metric_heading="MLM accuracy"):
    if not found:
        return []
    lines = [f"| variant | step-0 {metric_heading} | gap to post-LN at step 0 | steps to reach post-LN's step 0 "
             f"(per seed) | first step at post-LN's of the same step (per seed) | last-step {metric_heading} |",
             "| --- | --- | --- | --- | --- | --- |"]
    for entry in found:
        def steps(per_seed):
            return ", ".join("not reached" if step is None else str(step) for step in per_seed.values())
        lines.append(f"| {entry['variant']} | {entry['start']:.4f} | {entry['gap']:+.4f} | "
                     f"{steps(entry['recovered_at'])} | {steps(entry['caught_up_at'])} | {entry['final']:.4f} |")
    return lines


def unigram_stage_line(summary_rows, variants, unigram_accuracy: float | None, steps: int) -> str | None:
    """One sentence naming the variants whose mean held-out MLM accuracy at the last step is
    within `UNIGRAM_MARGIN` of the unigram baseline (models that have learnt word frequencies
    only, so the tables compare nothing of their modelling), or None when none is or the
    baseline is unknown."""
    if unigram_accuracy is None:
        return None
    at_unigram = [variant for variant in variants
                  if (entry := _entry(summary_rows, PRETRAINING, "masked_lm_accuracy", variant)) is not None
                  and entry["mean"] <= unigram_accuracy + UNIGRAM_MARGIN]
    if not at_unigram:
        return None
    measured = (f"held-out MLM accuracy after {steps} step{'' if steps == 1 else 's'} within {UNIGRAM_MARGIN} "
                f"of the unigram baseline ({unigram_accuracy:.4f})")
    if len(at_unigram) == len(variants):
        return (f"**No variant has left the unigram stage**: {measured} for each, so these models have learnt "
                "word frequencies only and the tables below compare nothing of the variants; pretrain longer.")
    if len(at_unigram) == 1:
        names, verb, whose = at_unigram[0], "has", "its rows"
    else:
        names, verb, whose = ", ".join(at_unigram[:-1]) + " and " + at_unigram[-1], "have", "their rows"
    return (f"**{names} {verb} not left the unigram stage**: {measured}, so {whose} below are a model that "
            "has learnt word frequencies only.")


def stuck_line(stuck: list[dict], task: str) -> str:
    """One sentence on `task`'s stuck runs (`results.stuck_runs`)."""
    mine = [run for run in stuck if run["task"] == task]
    if not mine:
        return "No run was found stuck (a training loss at chance: a model that learns nothing)."
    said = []
    for run in mine:
        times = {1: "once", 2: "twice"}.get(run["restarts"], f"{run['restarts']} times")
        parts = [f"{run['variant']} seed {run['seed']}"]
        if run["restarts"]:
            parts.append(f"restarted {times} (`--on_stuck=restart`; ended with `--seed={run['final_seed']}`)")
        if run["left_at_step"] is not None:
            parts.append(f"was found stuck at step {run['stuck_at_step']} and left chance by step "
                         f"{run['left_at_step']}: its numbers above are a model that learned late")
        elif run["stuck_at_step"] is not None:
            parts.append(f"stayed stuck from step {run['stuck_at_step']}: its numbers above are a model that "
                         "learned nothing")
        said.append(f"{parts[0]} " + ", then ".join(parts[1:]))
    return "Stuck runs (a training loss at chance, `warning: this run looks stuck` in the run's log): " + \
        "; ".join(said) + "."


def _sorted_head_medians(plan, variant, key):
    """[layers, heads]: each layer's head medians sorted, averaged over seeds rank by rank."""
    per_seed = []
    for seed in plan.seeds:
        path = os.path.join(plan.run_dir(variant, seed, ATTENTION), "attention_stats.json")
        if storage.exists(path):
            stats = json.loads(read_text(path))[key]
            per_seed.append([sorted(head["quantiles"]["0.5"] for head in layer) for layer in stats])
    return np.mean(np.array(per_seed), axis=0) if per_seed else None


def plot_mlm_accuracy(rows, variants, path, unigram=None):
    plt = optional.pyplot("the study report's plots")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for variant in variants:
        curves = {}
        for row in rows:
            if (row["task"], row["metric"], row["variant"]) == (PRETRAINING, "masked_lm_accuracy", variant):
                curves.setdefault(row["step"], []).append(row["value"])
        if not curves:
            continue
        steps = sorted(curves)
        values = [np.array(curves[s]) for s in steps]
        line, = ax.plot(steps, [v.mean() for v in values], label=variant)
        ax.fill_between(steps, [v.min() for v in values], [v.max() for v in values], color=line.get_color(),
                        alpha=0.2)
    if unigram is not None:
        ax.axhline(unigram, color="grey", linestyle="--", linewidth=1, label="unigram baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out MLM accuracy")
    ax.set_title("mean over seeds; band: min to max")
    ax.legend()
    fig.tight_layout()
    storage.save_figure(fig, path)
    plt.close(fig)


def plot_heads(plan, key, title, path):
    """One panel per variant (and `released`): x = layer (pair), a dot per head coloured by its median."""
    plt = optional.pyplot("the study report's plots")
    panels = [(v, _sorted_head_medians(plan, v, key)) for v in plan.compared]
    panels = [(v, m) for v, m in panels if m is not None and m.size]
    if not panels:
        return False
    top = max(float(m.max()) for _, m in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.2), sharey=True, squeeze=False)
    for ax, (variant, medians) in zip(axes[0], panels):
        layers, heads = medians.shape
        xs = np.repeat(np.arange(layers), heads) + np.tile(np.linspace(-0.25, 0.25, heads), layers)
        points = ax.scatter(xs, medians.reshape(-1), c=medians.reshape(-1), cmap="viridis", vmin=0, vmax=top, s=18)
        ax.set_title(variant)
        ax.set_xticks(range(layers))
        ax.set_xticklabels([str(i) if key == "entropy" else f"{i}-{i + 1}" for i in range(layers)])
        ax.set_xlabel("layer" if key == "entropy" else "layers")
    axes[0][0].set_ylabel(title)
    fig.subplots_adjust(bottom=0.18, left=0.08, right=0.86, wspace=0.1)
    fig.colorbar(points, ax=axes[0].tolist())
    storage.save_figure(fig, path)
    plt.close(fig)
    return True


def write_report(plan: StudyPlan, rows, summary_rows, baselines, path, description: str,
                 stuck: list[dict] = ()) -> None:
    """report.md and its three plots beside it; `stuck`: `results.stuck_runs(plan)`."""
    directory = os.path.dirname(path)
    variants = plan.compared
    # MLM-only studies (--no_nsp) have no NSP column.
    pretraining_columns = [(metric, heading) for metric, heading in PRETRAINING_COLUMNS
                           if any((row["task"], row["metric"]) == (PRETRAINING, metric) for row in summary_rows)]
    lines = ["# Post-LN, Pre-LN and RealFormer compared", "", description, "",
             f"Variants: {', '.join(variants)}; seeds: {', '.join(map(str, plan.seeds))}. Each cell is the mean ± "
             "sample standard deviation over seeds at the last step; differences to post-LN are paired by seed, "
             "with the 95% confidence interval of the mean difference (t distribution, n − 1 degrees of "
             "freedom). \"within noise\": the interval contains 0.", "",
             *([f"`released`: `{plan.init_checkpoint}` itself, fine-tuned without continued pretraining (every "
                "variant continues from it); its attention analysed once.", ""] if plan.released_baseline else []),
             "## Held-out pretraining metrics", "",
             *_table(summary_rows, variants, PRETRAINING, pretraining_columns, baselines.get(PRETRAINING)), "",
             *_differences(summary_rows, variants, PRETRAINING, pretraining_columns), ""]
    if plan.init_checkpoint:
        found = recovery(rows, plan.variants)
        if found:
            lines += [f"### From the released checkpoint (`{plan.init_checkpoint}`)", "",
                      "Step 0 is the checkpoint itself read as each variant (post-LN: as released; the other variants "
                      "compute another function of the same weights until continued pretraining adapts them, but for "
                      "a `+warmup` variant, which starts as the checkpoint and becomes its variant over "
                      f"{plan.residual_attention_warmup_steps} steps, or those its name gives: `+warmup1000`).", "",
                      *_recovery_table(found), ""]
    unigram = unigram_stage_line(summary_rows, plan.variants, baselines.get(PRETRAINING, {}).get("masked_lm_accuracy"),
                                 plan.num_train_steps)
    if unigram:
        lines += [unigram, ""]
    lines += ["![held-out MLM accuracy](mlm_accuracy.png)", ""]
    for task in plan.tasks:
        columns = [(metric, heading) for metric, heading in DOWNSTREAM_COLUMNS if metric.startswith("eval_")
                   or metric == "macro_f1" or any((row["task"], row["metric"]) == (task.name, metric)
                                                  for row in summary_rows)]
        lines += [f"## {task.name} (`{task.script} {' '.join(task.flags)}`)", "",
                  *_table(summary_rows, variants, task.name, columns, baselines.get(task.name)), "",
                  *_differences(summary_rows, variants, task.name, columns), "",
                  stuck_line(stuck, task.name), ""]
    lines += ["## Attention", "", *_table(summary_rows, variants, ATTENTION, ATTENTION_COLUMNS), "",
              *_differences(summary_rows, variants, ATTENTION, ATTENTION_COLUMNS), "",
              "Per head (sorted within each layer, averaged over seeds rank by rank):", "",
              "![attention entropy](attention_entropy.png)", "", "![adjacent-layer JSD](attention_jsd.png)", ""]
    plot_mlm_accuracy(rows, variants, os.path.join(directory, "mlm_accuracy.png"),
                      baselines.get(PRETRAINING, {}).get("masked_lm_accuracy"))
    plot_heads(plan, "entropy", "median attention entropy (nats)", os.path.join(directory, "attention_entropy.png"))
    plot_heads(plan, "jsd_adjacent", "median JSD, adjacent layers (nats)", os.path.join(directory, "attention_jsd.png"))
    storage.write_atomic(path, "\n".join(lines))
