"""Attention statistics as in the RealFormer paper: for every layer and head, the distribution
over (non-padding) query tokens of the entropy of the attention probabilities, and of the
Jensen-Shannon divergence between the same head's distributions in adjacent layers.

Natural logarithms: uniform attention over n tokens has entropy log n; identical distributions
have JSD 0; disjoint ones log 2.
"""

import numpy as np

from bert_realformer import optional
from bert_realformer.storage import save_figure

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)


def entropy(probs):
    """probs [..., T] -> [...]: -sum p log p (0 log 0 = 0)."""
    p = np.asarray(probs, np.float64)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def jensen_shannon(p, q):
    """JSD between distributions over the last axis (natural log)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = (p + q) / 2.0

    def kl(a, b):
        return np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0) / np.where(b > 0, b, 1.0)), 0.0), -1)
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


class AttentionStatistics:
    """Accumulates per-token values over batches; `summary()` gives the distributions."""

    def __init__(self, num_layers, num_heads):
        self.entropies = [[[] for _ in range(num_heads)] for _ in range(num_layers)]
        self.divergences = [[[] for _ in range(num_heads)] for _ in range(num_layers - 1)]

    def add(self, attention_probs, input_mask):
        """attention_probs: L arrays [B, N, S, S]; input_mask [B, S] (padding queries excluded)."""
        mask = np.asarray(input_mask).astype(bool)
        probs = [np.asarray(p, np.float64) for p in attention_probs]
        for layer, p in enumerate(probs):
            values = entropy(p)  # [B, N, S]
            for head in range(p.shape[1]):
                self.entropies[layer][head].extend(values[:, head][mask].tolist())
            if layer + 1 < len(probs):
                jsd = jensen_shannon(p, probs[layer + 1])
                for head in range(p.shape[1]):
                    self.divergences[layer][head].extend(jsd[:, head][mask].tolist())

    @staticmethod
    def _describe(values):
        values = np.asarray(values, np.float64)
        return {"count": int(values.size), "mean": float(values.mean()) if values.size else 0.0,
                "quantiles": {str(q): float(np.quantile(values, q)) if values.size else 0.0 for q in QUANTILES}}

    def summary(self):
        """{"entropy": [layer][head] -> stats, "jsd_adjacent": [layer l vs l+1][head] -> stats}."""
        return {"entropy": [[self._describe(h) for h in layer] for layer in self.entropies],
                "jsd_adjacent": [[self._describe(h) for h in layer] for layer in self.divergences]}


def plot(stats_by_layer, title, path, ylabel):
    """Box plots per layer (one panel each), heads ordered by median, as the paper's figures."""
    plt = optional.pyplot("the attention plots")
    layers = len(stats_by_layer)
    fig, axes = plt.subplots(1, layers, figsize=(2.6 * layers, 3.2), sharey=True, squeeze=False)
    for index, (ax, heads) in enumerate(zip(axes[0], stats_by_layer)):
        order = sorted(range(len(heads)), key=lambda h: np.median(heads[h]) if len(heads[h]) else 0.0)
        ax.boxplot([heads[h] for h in order], showfliers=False)
        ax.set_xticks(range(1, len(order) + 1), [str(h) for h in order], fontsize=7)
        ax.set_title(f"layer {index}" if "JSD" not in ylabel else f"layers {index}-{index + 1}", fontsize=9)
        ax.set_xlabel("head (by median)", fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
