"""Progressive Layer Dropping (Zhang & He 2020) schedule.

theta(t) = (1 - theta_bar) * exp(-gamma * t) + theta_bar, with t the optimizer step;
layer l (1-based) of L is kept with p_l = 1 - (l / L) * (1 - theta(t)).
"""

from keras import ops


def keep_probabilities(step, num_layers, theta_bar=0.5, gamma=0.001):
    """Float32 [num_layers] keep probabilities at optimizer step `step` (a scalar)."""
    theta = (1.0 - theta_bar) * ops.exp(-gamma * ops.cast(step, "float32")) + theta_bar
    depth = ops.arange(1, num_layers + 1, dtype="float32") / float(num_layers)
    return 1.0 - depth * (1.0 - theta)
