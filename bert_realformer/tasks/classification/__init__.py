"""Sentence and sentence-pair classification (and STS-B regression), as the original
run_classifier.py: the data (`reading`: examples, file formats, the `Processor`; `glue` with
XNLI, `clue`, `own_files` (generic, THUCNews); `processors` by task name),
`features` (cached records, long documents in windows), `task` (the loss, the training task,
prediction with windows combined) and `metrics`."""
