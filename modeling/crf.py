"""A linear-chain CRF in `keras.ops` (runs on every backend): log-likelihood by the forward
algorithm and Viterbi decoding.

Notation: B batch, T time steps (words), C tags. A tag path y scores
`sum_t emissions[t, y_t] + sum_{t>0} transitions[y_{t-1}, y_t]` over the steps where `mask`
is 1; the real steps of each sequence come first (the mask is 1...1 0...0) and every sequence
has at least one. The time loops are `keras.ops.scan`; each step's output has the carry's
shape and dtype, as the TensorFlow backend requires.
"""

from keras import ops


def _time_major(x):
    return ops.moveaxis(x, 1, 0)


def sequence_scores(emissions, tags, mask, transitions):
    """Scores of the given paths.

    Args:
      emissions: float [B, T, C]; tags: int [B, T]; mask: [B, T] (1 = a real step);
      transitions: float [C, C] (`transitions[i, j]`: from tag i to tag j).
    Returns:
      float32 [B].
    """
    mask = ops.cast(mask, "float32")
    num_tags = ops.shape(emissions)[-1]
    one_hot = ops.one_hot(ops.cast(tags, "int32"), num_tags, dtype="float32")     # [B, T, C]
    unary = ops.sum(ops.sum(one_hot * emissions, axis=-1) * mask, axis=-1)
    moves = ops.einsum("bti,ij,btj->bt", one_hot[:, :-1], transitions, one_hot[:, 1:])
    return unary + ops.sum(moves * mask[:, 1:], axis=-1)


def log_partition(emissions, mask, transitions):
    """log of the sum of exp(score) over every tag path (the forward algorithm): float32 [B]."""
    mask = ops.cast(mask, "float32")

    def step(alpha, inputs):
        emission, real = inputs                                                    # [B, C], [B]
        scores = alpha[:, :, None] + transitions[None, :, :] + emission[:, None, :]
        new = ops.logsumexp(scores, axis=1)
        alpha = ops.where(real[:, None] > 0, new, alpha)
        return alpha, alpha

    alpha, _ = ops.scan(step, emissions[:, 0], (_time_major(emissions)[1:], _time_major(mask)[1:]))
    return ops.logsumexp(alpha, axis=-1)


def log_likelihood(emissions, tags, mask, transitions):
    """log p(tags | emissions) per sequence: float32 [B]."""
    emissions = ops.cast(emissions, "float32")
    transitions = ops.cast(transitions, "float32")
    return sequence_scores(emissions, tags, mask, transitions) - log_partition(emissions, mask, transitions)


def viterbi_decode(emissions, mask, transitions):
    """The best path of each sequence: int32 [B, T] (steps past a sequence's end repeat its
    last tag)."""
    emissions = ops.cast(emissions, "float32")
    transitions = ops.cast(transitions, "float32")
    mask = ops.cast(mask, "float32")
    num_tags = ops.shape(emissions)[-1]
    stay = ops.cast(ops.arange(num_tags), "float32")[None, :]                      # [1, C]

    def forward(score, inputs):
        emission, real = inputs
        candidates = score[:, :, None] + transitions[None, :, :]                  # [B, from, to]
        best_from = ops.cast(ops.argmax(candidates, axis=1), "float32")            # [B, C]
        new = ops.max(candidates, axis=1) + emission
        keep = real[:, None] > 0
        # Past the end, each tag points to itself, so backtracking carries the last tag through.
        return ops.where(keep, new, score), ops.where(keep, best_from, stay + 0.0 * score)

    score, backpointers = ops.scan(forward, emissions[:, 0],
                                   (_time_major(emissions)[1:], _time_major(mask)[1:]))
    last = ops.one_hot(ops.argmax(score, axis=-1), num_tags, dtype="float32")     # [B, C]

    def backward(current, pointers):
        previous = ops.sum(current * pointers, axis=-1)                            # [B]
        previous = ops.one_hot(ops.cast(previous, "int32"), num_tags, dtype="float32")
        return previous, current

    first, later = ops.scan(backward, last, backpointers, reverse=True)            # later: [T-1, B, C]
    path = ops.concatenate([first[None], later], axis=0)                           # [T, B, C]
    return ops.cast(ops.argmax(_time_major(path), axis=-1), "int32")
