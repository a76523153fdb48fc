"""Named-entity recognition (token classification, optionally with a CRF): `reading` (CoNLL
files), `features` (word pieces and the first piece of each word), `task` (the loss, the
training task, predicted tags) and `metrics` (conlleval's)."""
