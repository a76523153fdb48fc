"""Runs tf-models-official's create_pretraining_data (its copy of the original) in the bench's
own virtual environment (bench/.venv-tfm, `make bench-peers`).

With `--faithful_masking`, its masking step (which draws n-gram style, differently from the
original BERT) is replaced by the original algorithm (ours, through a token <-> id adapter), so
that its output must equal the original's and ours. Everything else (reading, its tokenizer,
instance creation, `tf.train.Example` writing) is tf-models-official's own code.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _faithful_masking(module):
    sys.path.insert(0, ROOT)
    from pretraining.instances import MaskingOptions, VocabIds, create_masked_lm_predictions
    state = {}

    def masked(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
               do_whole_word_mask, max_ngram_size=None):
        if "vocab" not in state:
            vocab = module.tokenization.load_vocab(module.FLAGS.vocab_file)
            state.update(vocab=vocab, inv={i: t for t, i in vocab.items()}, ids=VocabIds(vocab))
        vocab, inv = state["vocab"], state["inv"]
        options = MaskingOptions(masked_lm_prob, max_predictions_per_seq, do_whole_word_mask)
        out, positions, labels = create_masked_lm_predictions([vocab[t] for t in tokens], options,
                                                              state["ids"], rng)
        return [inv[i] for i in out], positions, [inv[i] for i in labels]

    module.create_masked_lm_predictions = masked


if __name__ == "__main__":
    from absl import app

    from official.nlp.data import create_pretraining_data as module
    if "--faithful_masking" in sys.argv:
        sys.argv.remove("--faithful_masking")
        _faithful_masking(module)
    app.run(module.main)
