"""Means, standard deviations and paired confidence intervals over seeds, without SciPy.

    summary(values)                       # {"mean", "std", "n"} (sample std, n - 1)
    paired_difference(ours, baseline)     # {"mean", "std", "n", "ci95": [low, high]} over shared seeds
"""

import math
from collections.abc import Mapping, Sequence


def summary(values: Sequence[float]) -> dict:
    """Mean, sample standard deviation (n - 1 in the denominator; 0 for one value) and n."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = math.fsum(values) / n
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return {"mean": mean, "std": math.sqrt(variance), "n": n}


def _t_central_probability(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with `df` (a positive integer) degrees of freedom: the closed
    forms in theta = atan(t / sqrt(df)) (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    sine, cosine = math.sin(theta), math.cos(theta)
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        series, term = 0.0, cosine
        for k in range(1, (df - 1) // 2 + 1):
            if k > 1:
                term *= cosine * cosine * (2 * k - 2) / (2 * k - 1)
            series += term
        return 2 / math.pi * (theta + sine * series) if df > 1 else 2 / math.pi * theta
    series, term = 0.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for k in range(df // 2):
        if k > 0:
            term *= cosine * cosine * (2 * k - 1) / (2 * k)
        series += term
    return sine * series


def t_quantile(probability: float, df: int) -> float:
    """The `probability` quantile (> 0.5) of Student's t with `df` degrees of freedom, by
    bisection on the closed-form distribution function; t_quantile(0.975, 2) = 4.3027."""
    if not 0.5 < probability < 1 or df < 1:
        raise ValueError(f"t_quantile({probability}, {df}): needs 0.5 < probability < 1 and df >= 1")
    central = 2 * probability - 1
    low, high = 0.0, 1.0
    while _t_central_probability(high, df) < central:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if _t_central_probability(middle, df) < central:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def paired_difference(values: Mapping[int, float], baseline: Mapping[int, float],
                      confidence: float = 0.95) -> dict | None:
    """`values[seed] - baseline[seed]` over the seeds both have: mean, sample std, n and the
    two-sided `confidence` interval of the mean difference from the t distribution with n - 1
    degrees of freedom (None for the interval of a single pair). None without shared seeds."""
    seeds = sorted(set(values) & set(baseline))
    if not seeds:
        return None
    result = summary([values[s] - baseline[s] for s in seeds])
    result["seeds"] = seeds
    if result["n"] > 1:
        half = t_quantile(0.5 + confidence / 2, result["n"] - 1) * result["std"] / math.sqrt(result["n"])
        result["ci95"] = [result["mean"] - half, result["mean"] + half]
    else:
        result["ci95"] = None
    return result
