"""The prediction files tasks share."""

import os
from collections.abc import Iterable, Sequence

from bert_realformer import storage

TEST_RESULTS = "test_results.tsv"


def write_test_results(rows: Iterable[Sequence[float]], output_dir: str) -> list[str]:
    """OUTPUT_DIR/test_results.tsv as the original writes it: one line of tab-separated numbers
    (a test example's probabilities, or its score) per example, written under a temporary name
    and renamed. Returns [its path]."""
    path = os.path.join(output_dir, TEST_RESULTS)
    with storage.atomic_output(path) as f:
        for row in rows:
            f.write("\t".join(str(float(v)) for v in row) + "\n")
    return [path]
