"""Training progress for people: one line per loop of steps, redrawn in place on a terminal.

    step 1200/10000: loss 2.3411 (masked_lm_loss 2.0102, next_sentence_loss 0.3309), 4.10 steps/s,
        131.2 examples/s, ETA 35m47s   (one line)

On a terminal the line is preceded by a bar and rewritten; otherwise (a log file, CI) each loop
prints a new line. Written to stderr, as the original's progress output.
"""

import sys
import time

HIDDEN = ("gradient_norm", "loss_scale")  # in the summaries, not on the line


def _duration(seconds):
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class Progress:
    """`update(step, metrics)` after each loop; rates are measured since the previous update."""

    def __init__(self, total_steps: int, examples_per_step: int, start_step: int = 0, stream=None):
        self.total_steps = total_steps
        self.examples_per_step = examples_per_step
        self.stream = stream or sys.stderr
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_step, self._last_time = start_step, time.time()
        self.steps_per_second = 0.0

    def update(self, step: int, metrics: dict) -> str:
        now = time.time()
        self.steps_per_second = (step - self._last_step) / max(now - self._last_time, 1e-9)
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
        text += (f", {self.steps_per_second:.2f} steps/s, "
                 f"{self.steps_per_second * self.examples_per_step:.1f} examples/s")
        if 0 < step < self.total_steps and self.steps_per_second > 0:
            text += f", ETA {_duration((self.total_steps - step) / self.steps_per_second)}"
        return text
