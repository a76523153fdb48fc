"""Reading users' UTF-8 text files, with one-line errors that name the file and line.

Text is decoded strictly, as the original's readers did: a byte sequence that is not UTF-8 is an
`InputError` such as "corpus.txt:1042: not UTF-8 (invalid start byte 0xff at column 17)", never
silently dropped or replaced. Lines split on b"\\n" only and keep their line ending.
"""

import codecs
import re
from collections.abc import Iterator

from bert_realformer import storage
from bert_realformer.errors import InputError

_BLOCK = 1 << 24
_NOT_SPACE = re.compile(r"\S")


def _describe(error: UnicodeDecodeError, data: bytes) -> str:
    """'invalid start byte 0xff at column 17' for an error inside `data` (one line's bytes)."""
    column = len(data[:error.start].decode("utf-8", "replace")) + 1
    return f"{error.reason} 0x{data[error.start]:02x} at column {column}" if error.start < len(data) \
        else f"{error.reason} at column {column}"


def decode_line(raw: bytes, path: str, number: int) -> str:
    """`raw` (line `number` of `path`) as text; an `InputError` naming both if it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}:{number}: not UTF-8 ({_describe(error, raw)})") from None


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """Yields (line number from 1, line with its ending) for each line of `path`. A UTF-8
    byte-order mark at the start of the file (as spreadsheet programs write) is not text."""
    with storage.open_file(path) as f:
        for number, raw in enumerate(f, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            yield number, decode_line(raw, path, number)


def read_text(path: str) -> str:
    """The whole of `path` as text (e.g. a JSON document); errors name the line."""
    data = storage.read_bytes(path)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        number = data.count(b"\n", 0, error.start) + 1
        line_start = data.rfind(b"\n", 0, error.start) + 1
        line_end = data.find(b"\n", error.start)
        line = data[line_start:line_end if line_end >= 0 else len(data)]
        shifted = UnicodeDecodeError(error.encoding, line, error.start - line_start,
                                     error.end - line_start, error.reason)
        raise InputError(f"{path}:{number}: not UTF-8 ({_describe(shifted, line)})") from None


def check_text_file(path: str) -> None:
    """Reads all of `path` in large blocks: an `InputError` unless it can be read, is UTF-8
    throughout and has at least one non-blank line. Cheap next to tokenizing the file."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    has_text = False
    with storage.open_file(path) as f:
        while True:
            block = f.read(_BLOCK)
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError:
                break  # re-read line by line below, for the line number
            if not has_text and _NOT_SPACE.search(text):
                has_text = True
            if not block:
                if not has_text:
                    raise InputError(f"{path}: holds no text (every line is blank)")
                return
    for _ in read_lines(path):  # raises with the line number and column
        pass
    raise InputError(f"{path}: not UTF-8")  # a sequence split across lines: no single line is wrong
