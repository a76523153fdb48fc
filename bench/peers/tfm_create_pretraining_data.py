"""Runs tf-models-official's create_pretraining_data (its copy of the original) in the bench's
own virtual environment (bench/.venv-tfm, `make bench-peers`).

Its masking step draws n-gram style, differently from the original BERT, so it can be replaced:
`--faithful_masking=original` by the original's masking written out here on token strings with
the standard library's `rng.shuffle`/`rng.randint` (what the original does, at its speed), or
`--faithful_masking=ours` by our optimised masking through a token <-> id adapter. Either way
the output must equal the original's and ours. Everything else (reading, its tokenizer,
instance creation, `tf.train.Example` writing) is tf-models-official's own code.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _original_masking(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                      do_whole_word_mask, max_ngram_size=None):
    """The original BERT masking on token strings (the reference for the peer's speed)."""
    groups = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if do_whole_word_mask and groups and token.startswith("##"):
            groups[-1].append(i)
        else:
            groups.append([i])
    rng.shuffle(groups)
    output = list(tokens)
    budget = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    chosen, covered = [], set()
    for group in groups:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(group) > budget or any(i in covered for i in group):
            continue
        for i in group:
            covered.add(i)
            if rng.random() < 0.8:
                output[i] = "[MASK]"
            elif rng.random() < 0.5:
                output[i] = tokens[i]
            else:
                output[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            chosen.append((i, tokens[i]))
    chosen.sort(key=lambda item: item[0])
    return output, [i for i, _ in chosen], [label for _, label in chosen]


def _our_masking(module):
    sys.path.insert(0, ROOT)
    from bert_realformer.pretraining.instances import MaskingOptions, VocabIds, create_masked_lm_predictions
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
    for arg in list(sys.argv):
        if arg.startswith("--faithful_masking="):
            sys.argv.remove(arg)
            if arg.endswith("=original"):
                module.create_masked_lm_predictions = _original_masking
            else:
                _our_masking(module)
    app.run(module.main)
