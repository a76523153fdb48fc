"""Sentence and sentence-pair classification (and STS-B regression), as the original
run_classifier.py: `reading` (the processors: GLUE, XNLI, CLUE, THUCNews, your own files),
`features` (cached records, long documents in windows), `task` (the loss, the training task,
prediction with windows combined) and `metrics`."""
