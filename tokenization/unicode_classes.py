"""The character classes of the original BasicTokenizer as code point sets, computed once from
this Python's Unicode database with the reference predicates, and rendered as regex classes
for Python's `re` and for RE2 (tensorflow-text). Computing them takes about half a second."""

import functools
import sys
import unicodedata

from tokenization import reference


@functools.cache
def code_points():
    """{'removed', 'whitespace', 'marks', 'punctuation', 'cjk', 'split'}: sorted lists.

    'split' is what Python's `str.split()` still splits on after cleaning (space, U+2028, U+2029).
    The reference predicates decide; they are only asked about code points whose category could
    make them true (the rest, e.g. the unassigned planes, cannot be controls, whitespace,
    marks, punctuation or CJK, and are not `isspace()`).
    """
    sets = {name: [] for name in ("removed", "whitespace", "marks", "punctuation", "split")}
    category = unicodedata.category
    for cp in range(sys.maxunicode + 1):
        char = chr(cp)
        cat = category(char)
        if (cat in ("Cn", "Co", "Cs", "Lo", "Ll", "Lu", "Nd", "So") and cp > 127 and cp != 0xFFFD
                and not char.isspace()):
            continue  # none of the predicates can hold (Lo CJK ideographs come from the ranges)
        if cp == 0 or cp == 0xFFFD or reference.is_control(char):
            sets["removed"].append(cp)
        elif reference.is_whitespace(char):
            sets["whitespace"].append(cp)
        elif char.isspace():
            sets["split"].append(cp)
        if cat == "Mn":
            sets["marks"].append(cp)
        if reference.is_punctuation(char):
            sets["punctuation"].append(cp)
    sets["split"] = [32] + sets["split"]
    sets["cjk"] = [cp for lo, hi in reference._CJK_RANGES for cp in range(lo, hi + 1)]
    return sets


def _ranges(cps):
    ranges = []
    for cp in cps:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


def re2_ranges(cps):
    """A RE2 character class of sorted code points, as ranges: `[\\x{3000}\\x{4E00}-\\x{9FFF}]`."""
    parts = [f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in _ranges(cps)]
    return "[" + "".join(parts) + "]"


def re2_class(name):
    """The RE2 character class of `code_points()[name]` (`re2_ranges`)."""
    return re2_ranges(code_points()[name])


def python_class(*names, negate=False, extra=""):
    """A Python `re` character class of the union of `names`, e.g. `[\\U00004E00-\\U00009FFF]`;
    `extra` goes inside the brackets (`negate=True, extra=r"\\s"`: none of them, no whitespace)."""
    union = sorted(set().union(*(code_points()[name] for name in names)))
    parts = [f"\\U{lo:08X}" if lo == hi else f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in _ranges(union)]
    return ("[^" if negate else "[") + extra + "".join(parts) + "]"
