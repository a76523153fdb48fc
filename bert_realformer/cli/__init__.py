"""The command-line scripts, one module each (the top layer). Each defines its absl flags and
`main`, and `entry`, which three doors open: the installed console command (`bert-` and the
script's name with hyphens: `bert-run-classifier`), the repository's wrapper script
(`python run_classifier.py`) and `python -m bert_realformer.cli.run_classifier`."""

SCRIPTS = ("analyze_attention", "convert_checkpoint", "create_pretraining_data", "extend_vocabulary",
           "extract_features", "prepare_study_data", "run_classifier", "run_multiple_choice", "run_ner",
           "run_pretraining", "run_squad", "run_study")


def module_of(script: str) -> str | None:
    """`run_classifier.py` (or `run_classifier`) -> `bert_realformer.cli.run_classifier`; None
    for a name that is not one of the scripts."""
    stem = script[:-3] if script.endswith(".py") else script
    return f"{__name__}.{stem}" if stem in SCRIPTS else None


def command_of(script: str) -> str:
    """The installed console command of `script`: `run_classifier.py` -> `bert-run-classifier`."""
    return "bert-" + script.removesuffix(".py").replace("_", "-")
