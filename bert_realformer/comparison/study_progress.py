"""The study's own progress: before each run, which of how many it is, the time so far, and the
time left. A run costs about what the finished runs of its kind cost (one variant's
pretraining about another's), so the time left is the sum, over the runs still to do, of the
mean time of their kind; it is known once a run of each kind still to come has finished (in a
study of one seed, after the first variant's runs)."""

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from bert_realformer.training.progress import duration_text


class StudyProgress:
    """`line(index, still_to_do)` before the run at `index`; `finished(kind, seconds)` after a
    run that ran (a re-used one costs nothing and tells nothing)."""

    def __init__(self, kinds: Sequence[str], clock: Callable[[], float] = time.monotonic):
        self.kinds = list(kinds)  # each run's kind, in the order they run
        self.clock = clock
        self.started = clock()
        self.seconds = defaultdict(list)  # kind -> the durations of its finished runs

    def finished(self, kind: str, seconds: float) -> None:
        self.seconds[kind].append(seconds)

    def line(self, index: int, name: str, still_to_do: Sequence[bool]) -> str:
        """`[study] run 5 of 12: NAME (8m10s so far, about 21m30s left)`; `still_to_do[i]`:
        whether run i has yet to run (False: finished before, re-used)."""
        elapsed = duration_text(self.clock() - self.started)
        left = [kind for kind, to_do in zip(self.kinds[index:], still_to_do[index:]) if to_do]
        unknown = sorted({kind for kind in left if not self.seconds[kind]})
        if unknown:
            estimate = "the time left is known once a run of each kind has finished"
        else:
            estimate = f"about {duration_text(sum(statistics.mean(self.seconds[k]) for k in left))} left"
        return f"[study] run {index + 1} of {len(self.kinds)}: {name} ({elapsed} so far, {estimate})"
