"""Multi-label classification (`run_classifier.py --multi_label`): each example has any number
of labels (none included). `reading` (generic files with a list of labels per example),
`losses` (sigmoid and binary cross-entropy, R-Drop), `metrics` (micro/macro F1 at decision
thresholds, per-label thresholds tuned on the dev set) and `task` (the `FinetuningTask`)."""
