"""The command-line scripts, one module each (the top layer). Each defines its absl flags and
`main`, and `entry`, which three doors open: the installed console command (`bert-` and the
script's name with hyphens: `bert-run-classifier`), the repository's wrapper script
(`python run_classifier.py`) and `python -m bert_realformer.cli.run_classifier`."""
