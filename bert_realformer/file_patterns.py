"""Comma-separated file names and globs (`input_file=a.txt,shards/*.txt`) -> the files."""

from bert_realformer import storage
from bert_realformer.errors import InputError


def expand_file_patterns(spec: str, option: str) -> list[str]:
    """An option's comma-separated file names and globs -> the files, each pattern's sorted; an
    `InputError` naming `option` for a pattern that matches nothing or a match that is not a file."""
    files = []
    for pattern in (p.strip() for p in (spec or "").split(",")):
        if not pattern:
            continue
        matches = storage.glob(pattern)
        if not matches:
            raise InputError(f"{option}: {pattern} matches no file", options=(option,))
        for path in matches:
            if storage.isdir(path):
                raise InputError(f"{option}: {path} is not a file", options=(option,))
        files.extend(matches)
    if not files:
        raise InputError(f"{option} is required", options=(option,))
    return files


# ------------------------------------------------------------------ reading
