"""Multiple-choice results: accuracy and loss (`eval_results.txt`), the rows of
`test_results.tsv`."""

import numpy as np

from bert_realformer.tasks.classification.metrics import mean_nll

REPORTED = ("eval_accuracy", "eval_loss")  # eval_results.txt's, the main metric first


def evaluation_results(examples, probabilities, global_step):
    """`eval_accuracy`, `eval_loss` (mean -log p(answer)), `global_step`."""
    labels = np.array([e.label for e in examples])
    return {"eval_accuracy": float(np.mean(probabilities.argmax(-1) == labels)),
            "eval_loss": mean_nll(probabilities, labels), "global_step": global_step}


def test_rows(examples, probabilities):
    """Each example's choice probabilities without its padding choices (test_results.tsv)."""
    return [row[:len(example.choices)] for example, row in zip(examples, probabilities, strict=True)]
