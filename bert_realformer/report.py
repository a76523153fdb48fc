"""What a run tells its user as it goes (the weights it starts from, progress, evaluations, a
signal received, a study's runs): one line at a time, to stderr or the stream the caller gives
(tests and benchmarks pass their own). Library code says such lines through `say`; warnings
and diagnostics go through `logging` (the scripts show them as `warning: ...`,
`plain_warnings`)."""

import logging
import sys
from typing import TextIO

PACKAGES = ("bert_realformer", "modeling", "tokenization")


def say(text: str, stream: TextIO | None = None) -> None:
    """One line for the user, flushed at once."""
    print(text, file=stream or sys.stderr, flush=True)


def plain_warnings(stream: TextIO | None = None) -> None:
    """The project's warnings (and errors) as `warning: message` lines on stderr instead of
    absl's log format; what the scripts call before they run."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Plain())
    handler.setLevel(logging.WARNING)
    for name in PACKAGES:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False



class _Plain(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"
