"""SQuAD evaluation computed as the official v1.1 and v2.0 scripts compute it.

    python -m tasks.squad_evaluate DATA.json PRED.json [--na-prob-file NULL_ODDS.json]
        [--na-prob-thresh T] [--out-file OUT.json]
    python -m tasks.squad_evaluate --metric=cmrc2018 DATA.json PRED.json

prints the v2.0 script's JSON: `exact`, `f1`, `total`, `HasAns_*`, `NoAns_*` and, with a null-odds
file, `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`. With `--metric=cmrc2018`,
the CMRC 2018 script's JSON instead (`tasks/cmrc2018_evaluate.py`). Answers are normalised
(lower case, punctuation and articles removed, whitespace collapsed); a question scores the
maximum over its gold answers; an unanswerable question has the single gold answer "".
"""

import argparse
import collections
import json
import logging
import re
import string
import sys

from bert_realformer import storage
from bert_realformer.text_files import read_text


def reported_metrics(eval_metric: str = "squad", version_2_with_negative: bool = False) -> tuple[str, ...]:
    """What an evaluation reports, the main metric first: CMRC 2018's, v2.0's or v1.1's."""
    if eval_metric == "cmrc2018":
        return ("F1", "EM", "AVERAGE")
    if version_2_with_negative:
        return ("f1", "exact", "HasAns_f1", "HasAns_exact", "NoAns_f1", "NoAns_exact", "best_f1", "best_exact")
    return ("f1", "exact_match")

logger = logging.getLogger(__name__)

_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _tokens(text):
    return normalize_answer(text).split() if text else []


def exact_score(gold, prediction):
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold, prediction):
    gold_tokens, pred_tokens = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)  # both empty: 1, else 0
    common = collections.Counter(gold_tokens) & collections.Counter(pred_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def raw_scores(dataset, predictions):
    """({qid: exact}, {qid: f1}, {qid: has an answer}); questions without a prediction are left out."""
    exact, f1, has_answer = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa.get("answers", []) if normalize_answer(a["text"])]
        has_answer[qid] = bool(golds)
        golds = golds or [""]
        if qid not in predictions:
            logger.warning("missing prediction for %s", qid)
            continue
        exact[qid] = max(exact_score(g, predictions[qid]) for g in golds)
        f1[qid] = max(f1_score(g, predictions[qid]) for g in golds)
    return exact, f1, has_answer


def _apply_threshold(scores, na_probs, has_answer, threshold):
    return {qid: float(not has_answer[qid]) if na_probs[qid] > threshold else s for qid, s in scores.items()}


def _summary(exact, f1, qids=None):
    qids = list(exact) if qids is None else qids
    total = len(qids)
    return {"exact": 100.0 * sum(exact[q] for q in qids) / total if total else 0.0,
            "f1": 100.0 * sum(f1[q] for q in qids) / total if total else 0.0, "total": total}


def _best_threshold(predictions, scores, na_probs, has_answer):
    score = best = sum(1 for q in scores if not has_answer[q])
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        score += scores[qid] if has_answer[qid] else (-1 if predictions[qid] else 0)
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), threshold


def evaluate(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """The v2.0 script's result dict for `dataset` (the "data" list) and {qid: answer}."""
    given_na = na_probs is not None
    na_probs = na_probs if given_na else {k: 0.0 for k in predictions}
    exact, f1, has_answer = raw_scores(dataset, predictions)
    exact_t = _apply_threshold(exact, na_probs, has_answer, na_prob_thresh)
    f1_t = _apply_threshold(f1, na_probs, has_answer, na_prob_thresh)
    result = _summary(exact_t, f1_t)
    for name, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in exact_t if has_answer[q] == wanted]
        if qids:
            result.update({f"{name}_{k}": v for k, v in _summary(exact_t, f1_t, qids).items()})
    if given_na:
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(predictions, exact, na_probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(predictions, f1, na_probs, has_answer)
    return result


def evaluate_v1(dataset, predictions):
    """The v1.1 script's {exact_match, f1} (every question answerable)."""
    exact, f1, _ = raw_scores(dataset, predictions)
    total = sum(1 for _ in _questions(dataset))
    return {"exact_match": 100.0 * sum(exact.values()) / total, "f1": 100.0 * sum(f1.values()) / total}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Official SQuAD v2.0 evaluation.")
    parser.add_argument("data_file", metavar="data.json")
    parser.add_argument("pred_file", metavar="pred.json")
    parser.add_argument("--out-file", "-o", metavar="eval.json")
    parser.add_argument("--na-prob-file", "-n", metavar="na_prob.json")
    parser.add_argument("--na-prob-thresh", "-t", type=float, default=1.0)
    parser.add_argument("--metric", choices=("squad", "cmrc2018"), default="squad")
    args = parser.parse_args(argv)
    try:
        dataset = json.loads(read_text(args.data_file))["data"]
        predictions = json.loads(read_text(args.pred_file))
        na_probs = json.loads(read_text(args.na_prob_file)) if args.na_prob_file else None
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.metric == "cmrc2018":
        from bert_realformer.tasks.squad import cmrc2018_metrics as cmrc2018_evaluate
        scores = cmrc2018_evaluate.evaluate(dataset, predictions)
        result = {**{k: f"{scores[k]:.3f}" for k in ("AVERAGE", "F1", "EM")},
                  "TOTAL": scores["TOTAL"], "SKIP": scores["SKIP"], "FILE": args.pred_file}
        print(json.dumps(result))
        return 0
    result = evaluate(dataset, predictions, na_probs, args.na_prob_thresh)
    if args.out_file:
        storage.write_atomic(args.out_file, json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
