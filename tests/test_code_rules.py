"""Rules of the code's shape that a review would otherwise re-check by hand: the Transformer
variant is read in one module (`modeling.variants`), never by comparing config strings."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ("bert_realformer", "modeling", "tokenization")
VARIANT_KEYS = {"layer_norm_type", "residual_attention"}
VARIANT_MODULE = ROOT / "modeling" / "variants.py"


def _library_files():
    for package in LIBRARY:
        yield from sorted((ROOT / package).rglob("*.py"))


def _compared_names(node):
    for operand in (node.left, *node.comparators):
        if isinstance(operand, ast.Attribute):
            yield operand.attr
        elif isinstance(operand, ast.Name):
            yield operand.id
        elif isinstance(operand, ast.Subscript) and isinstance(operand.slice, ast.Constant):
            yield operand.slice.value


def test_no_variant_string_comparisons_outside_the_variant_module():
    found = []
    for path in _library_files():
        if path == VARIANT_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and VARIANT_KEYS & set(_compared_names(node)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_the_rule_sees_a_comparison():
    tree = ast.parse('if config.residual_attention != "none":\n    pass\nif options["layer_norm_type"] == "pre": pass')
    compares = [node for node in ast.walk(tree) if isinstance(node, ast.Compare)]
    assert [VARIANT_KEYS & set(_compared_names(node)) for node in compares] == [{"residual_attention"},
                                                                                 {"layer_norm_type"}]


MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def test_no_function_over_60_lines_and_no_module_over_400():
    long_units = []
    for path in _library_files():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_units.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long_units.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert not long_units, long_units
