"""Classification and regression metrics, computed here (tested against hand-worked values).

All take numpy-compatible sequences. Class metrics follow the usual definitions: precision =
TP / (TP + FP), recall = TP / (TP + FN), F1 their harmonic mean, each 0 when undefined;
macro = unweighted mean over classes, weighted = mean weighted by each class's support.
"""

import json
import math

import numpy as np

# What a classification evaluation reports besides the task's main metric (`main_metric`).
REPORTED = ("eval_accuracy", "eval_loss", "macro_f1", "macro_precision", "macro_recall", "weighted_f1",
            "weighted_precision", "weighted_recall", "matthews_corrcoef", "f1", "pearson", "spearman")


def confusion_matrix(labels, predictions, num_classes):
    """[num_classes, num_classes] counts; rows are true labels, columns predictions."""
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (np.asarray(labels, int), np.asarray(predictions, int)), 1)
    return matrix


def per_class_scores(matrix):
    """{precision, recall, f1, support}: arrays over classes, from a confusion matrix."""
    matrix = np.asarray(matrix, dtype=np.float64)
    tp = np.diag(matrix)
    predicted = matrix.sum(axis=0)
    support = matrix.sum(axis=1)
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    denominator = precision + recall
    f1 = np.divide(2 * precision * recall, denominator, out=np.zeros_like(tp), where=denominator > 0)
    return {"precision": precision, "recall": recall, "f1": f1, "support": support.astype(np.int64)}


def classification_metrics(labels, predictions, num_classes):
    """accuracy, macro and weighted precision/recall/F1, the confusion matrix, per-class scores."""
    matrix = confusion_matrix(labels, predictions, num_classes)
    scores = per_class_scores(matrix)
    total = matrix.sum()
    support = scores["support"].astype(np.float64)
    result = {"accuracy": float(np.trace(matrix) / total) if total else 0.0}
    for name in ("precision", "recall", "f1"):
        result[f"macro_{name}"] = float(np.mean(scores[name]))
        result[f"weighted_{name}"] = float(np.sum(scores[name] * support) / total) if total else 0.0
    result["confusion_matrix"] = matrix
    result["per_class"] = scores
    return result


def matthews_corrcoef(labels, predictions):
    """Matthews correlation of two binary label sequences (0 when undefined), as for CoLA."""
    matrix = confusion_matrix(labels, predictions, 2).astype(np.float64)
    (tn, fp), (fn, tp) = matrix
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def binary_f1(labels, predictions, positive=1):
    """F1 of the positive class, as reported for MRPC and QQP."""
    matrix = confusion_matrix(labels, predictions, max(2, positive + 1))
    return float(per_class_scores(matrix)["f1"][positive])


def pearson(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(np.sum(dx * dx) * np.sum(dy * dy)))
    return float(np.sum(dx * dy) / denominator) if denominator else 0.0


def _ranks(values):
    """Ranks from 1, ties given their average rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), np.float64)
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x, y):
    """Spearman's rank correlation: Pearson's of the (tie-averaged) ranks."""
    return pearson(_ranks(x), _ranks(y))


def mean_nll(probabilities, labels) -> float:
    """The evaluation loss of a softmax: mean -log p(label) over the examples, each p floored at
    1e-30. `probabilities` [N, C], `labels` [N] class ids."""
    probabilities, labels = np.asarray(probabilities), np.asarray(labels)
    chosen = probabilities[np.arange(len(labels)), labels]
    return float(np.mean(-np.log(np.maximum(chosen, 1e-30))))


def main_metric(task: str, regression: bool) -> str:
    """The metric a task is judged by (GLUE's): Matthews correlation for CoLA, F1 for MRPC
    and QQP, Pearson correlation for regression (STS-B), accuracy for every other task."""
    if regression:
        return "pearson"
    return {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1"}.get(task, "eval_accuracy")


def evaluation_results(task, outputs, labels, label_list, global_step):
    """The eval_results.txt entries (key -> value)."""
    if label_list is None:
        scores = outputs[:, 0]
        return {"eval_loss": float(np.mean((scores - labels) ** 2)), "pearson": pearson(scores, labels),
                "spearman": spearman(scores, labels), "global_step": global_step}
    predictions = outputs.argmax(-1)
    report = classification_metrics(labels, predictions, len(label_list))
    result = {"eval_accuracy": report["accuracy"], "eval_loss": mean_nll(outputs, labels),
              "global_step": global_step}
    for key in ("macro_precision", "macro_recall", "macro_f1", "weighted_precision", "weighted_recall",
                "weighted_f1"):
        result[key] = report[key]
    if task == "cola":
        result["matthews_corrcoef"] = matthews_corrcoef(labels, predictions)
    if task in ("mrpc", "qqp"):
        result["f1"] = binary_f1(labels, predictions)
    per_class = report["per_class"]
    for i, label in enumerate(label_list):
        for name in ("precision", "recall", "f1", "support"):
            value = per_class[name][i]
            result[f"class_{label}_{name}"] = int(value) if name == "support" else float(value)
    result["confusion_matrix"] = json.dumps(report["confusion_matrix"].tolist())
    return result
