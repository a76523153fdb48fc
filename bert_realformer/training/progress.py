"""Training progress for people: one line per loop of steps, redrawn in place on a terminal.

    step 1200/10000: loss 2.3411 (masked_lm_loss 2.0102, next_sentence_loss 0.3309), R steps/s,
        E examples/s, ETA 35m47s   (one line; R and E: this loop's rates)

On a terminal the line is preceded by a bar and rewritten; otherwise (a log file, CI) each loop
prints a new line. Written to stderr, as the original's progress output.

The first loop's time is mostly tracing and compiling, so its line has no rate and no ETA;
rates and the ETA come from the second loop on. `LoopSizes` sizes the loops so that a line
comes within seconds of the first step and then about every `LOOP_SECONDS`.
"""

import sys
import time

HIDDEN = ("gradient_norm", "loss_scale")  # in the summaries, not on the line
LOOP_SECONDS = (10.0, 60.0)  # a loop's target duration: at first, and once the run is long


def duration_text(seconds: float) -> str:
    """`12m05s`, or `1h07m` from an hour on."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class LoopSizes:
    """How many steps the next loop of steps makes (`next()`), from the time the previous
    ones took (`record(steps, seconds)`): one first (its time is mostly tracing), then as many
    as take about `LOOP_SECONDS[0]` at the last loop's rate, growing to `LOOP_SECONDS[1]` as
    the run grows long (a tenth of the time so far); never more than `limit`
    (--iterations_per_loop). Where the step is fast, loops reach `limit` after two or three."""

    def __init__(self, limit: int, seconds: tuple[float, float] = LOOP_SECONDS):
        self.limit = limit
        self.seconds = seconds
        self._next = 1
        self._elapsed = 0.0

    def next(self) -> int:
        return self._next

    def record(self, steps: int, seconds: float):
        self._elapsed += seconds
        if steps < 1 or seconds <= 0:
            return
        target = min(max(self.seconds[0], 0.1 * self._elapsed), self.seconds[1])
        self._next = int(min(max(1, steps * target / seconds), self.limit))


class Progress:
    """`update(step, metrics)` after each loop; rates are measured since the previous update
    (none on the first: tracing)."""

    def __init__(self, total_steps: int, examples_per_step: int, start_step: int = 0, stream=None):
        self.total_steps = total_steps
        self.examples_per_step = examples_per_step
        self.stream = stream or sys.stderr
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_step, self._last_time = start_step, time.time()
        self._updates = 0
        self.steps_per_second: float | None = None  # None until the second loop

    def update(self, step: int, metrics: dict) -> str:
        now = time.time()
        if self._updates:
            self.steps_per_second = (step - self._last_step) / max(now - self._last_time, 1e-9)
        self._updates += 1
        self._last_step, self._last_time = step, now
        line = self._line(step, metrics)
        if self.interactive:
            done = int(30 * step / max(self.total_steps, 1))
            end = "\n" if step >= self.total_steps else ""
            self.stream.write(f"\r[{'=' * done}{'.' * (30 - done)}] {line}\x1b[K{end}")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        return line

    def _line(self, step, metrics):
        values = {name: float(value) for name, value in metrics.items() if name not in HIDDEN}
        text = f"step {step}/{self.total_steps}: loss {values.pop('loss'):.4f}"
        if values:
            text += " (" + ", ".join(f"{name} {value:.4f}" for name, value in values.items()) + ")"
        if self.steps_per_second is None:
            return text
        text += (f", {self.steps_per_second:.2f} steps/s, "
                 f"{self.steps_per_second * self.examples_per_step:.1f} examples/s")
        if 0 < step < self.total_steps and self.steps_per_second > 0:
            text += f", ETA {duration_text((self.total_steps - step) / self.steps_per_second)}"
        return text


def write_summaries(writer, step: int, metrics: dict, learning_rate, steps_per_second: float | None,
                    examples_per_step: int) -> None:
    """One loop's TensorBoard scalars: its metrics, the learning rate and (after the first loop,
    whose time is mostly tracing) the examples per second."""
    import tensorflow as tf
    with writer.as_default(step=step):
        for name, value in metrics.items():
            tf.summary.scalar(name, value)
        tf.summary.scalar("learning_rate", learning_rate)
        if steps_per_second is not None:
            tf.summary.scalar("examples_per_second", steps_per_second * examples_per_step)
    writer.flush()
