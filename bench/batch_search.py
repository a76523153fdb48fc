"""The largest batch that fits in memory, found with few probes (each probe is a whole
benchmark case, so a compile and a few steps: on a GPU a minute for BERT-Large at seq 512).

Whether a batch fits is assumed monotone: if batch b fits, every smaller batch fits.
"""

from __future__ import annotations

from collections.abc import Callable


def largest_fitting_batch(fits: Callable[[int], bool], start: int, multiple: int = 8,
                          limit: int = 4096) -> int | None:
    """The largest multiple of `multiple` up to `limit` for which `fits(batch)` is true.

    From `start` (rounded down to a multiple, at least `multiple`) it doubles while the batch
    fits, or halves while it does not, until one fitting and one failing batch bracket the
    answer; then it bisects between them. `fits` is called at most once per batch.

    Returns None when not even `multiple` fits.
    """
    if multiple < 1 or limit < multiple:
        raise ValueError(f"need 1 <= multiple <= limit, got multiple={multiple}, limit={limit}")
    top = limit // multiple * multiple
    batch = min(max(multiple, start // multiple * multiple), top)
    if fits(batch):
        good, bad = batch, None
        while bad is None and good < top:
            larger = min(good * 2, top)
            if fits(larger):
                good = larger
            else:
                bad = larger
        if bad is None:
            return good
    else:
        good, bad = None, batch
        while good is None:
            smaller = bad // 2 // multiple * multiple
            if smaller < multiple:
                return None
            if fits(smaller):
                good = smaller
            else:
                bad = smaller
    # Every batch probed so far lies outside (good, bad), so no batch is probed twice.
    while bad - good > multiple:  # fits(good) and not fits(bad)
        middle = (good + bad) // 2 // multiple * multiple
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good
