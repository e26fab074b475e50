"""Label scores from the top log-probabilities a server returns for the first generated token (vLLM, OpenAI-compatible).

Pure functions, no server and no heavy imports, so the API backends' arithmetic is tested with plain dicts.
A server returns the K most likely first tokens with their log-probabilities at temperature 1; a label's
probability is the sum over the tokens that spell it ("A", " A"), and a label outside the top K counts 0.
With a temperature, the first token's sampling distribution (labels + INVALID) is rebuilt from the same list:
exact when the list is the whole vocabulary, or when top-k <= K (the tail is cut anyway); otherwise the
tokens outside the list are one lump of their total mass (an approximation, flagged by `exact=False`).
`renormalised` and `with_invalid` are the label arithmetic the HF backend shares with these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .base import LabelScores, SamplingParams


def renormalised(per_label: Sequence[float], mass: float) -> tuple[float, ...]:
    """Label probabilities divided by `mass` (what the labels hold together); uniform when they hold nothing.

    >>> renormalised([0.375, 0.125], 0.5), renormalised([0.0, 0.0], 0.0)
    ((0.75, 0.25), (0.5, 0.5))
    """
    return tuple(p / mass for p in per_label) if mass > 0 else tuple(1 / len(per_label) for _ in per_label)


def with_invalid(picked: Sequence[float]) -> tuple[float, ...]:
    """The labels' shares of the first sampled token and INVALID (the rest) last, renormalised to sum to 1.

    >>> with_invalid([0.5, 0.25])
    (0.5, 0.25, 0.25)
    """
    other = max(0.0, 1.0 - sum(picked))
    total = sum(picked) + other
    return (*(p / total for p in picked), other / total)


def label_scores_from_top(
    top: Mapping[Any, float], label_keys: Sequence[set[Any]], sampling: SamplingParams | None, *, complete: bool = False
) -> tuple[LabelScores, bool]:
    """(LabelScores, exact) from first-token log-probabilities `top` (token -> logprob at temperature 1).

    `label_keys[i]`: the tokens of `top` that count for label i. `complete`: `top` is the whole vocabulary.
    `probs`/`mass` are exact for the labels in `top`; `answer_dist` (with `sampling`) is exact when `exact`.

    >>> scores, exact = label_scores_from_top({"A": math.log(0.6), "B": math.log(0.2), "x": math.log(0.2)},
    ...                                       [{"A"}, {"B"}], SamplingParams(temperature=1.0), complete=True)
    >>> [round(p, 3) for p in scores.probs], round(scores.mass, 3), [round(p, 3) for p in scores.answer_dist], exact
    ([0.75, 0.25], 0.8, [0.6, 0.2, 0.2], True)
    """
    probs = {token: math.exp(lp) for token, lp in top.items() if lp is not None and lp > -math.inf}
    per_label = [sum(probs.get(token, 0.0) for token in keys) for keys in label_keys]
    mass = min(1.0, sum(per_label))
    norm = renormalised(per_label, mass)
    if sampling is None:
        return LabelScores(probs=norm, mass=mass), True
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])
    if sampling.temperature <= 0:  # greedy: the most likely token decides
        best = ranked[0][0] if ranked else None
        picked = [float(best in keys) for keys in label_keys]
        return LabelScores(norm, mass, answer_dist=(*picked, 1.0 - sum(picked))), True
    cut = sampling.top_k is not None and 0 < sampling.top_k
    exact = complete or (sampling.top_k is not None and 0 < sampling.top_k <= len(ranked))  # `cut and top_k <= ...`
    if cut:
        ranked = ranked[: sampling.top_k]
    tail = 0.0 if complete or cut else max(0.0, 1.0 - sum(probs.values()))
    # Tempered weights p^(1/T), scaled by the largest so that nothing overflows; the tail is one lump.
    scale = ranked[0][1] if ranked else 1.0
    weights = [(token, (p / scale) ** (1.0 / sampling.temperature)) for token, p in ranked]
    if tail > 0:
        weights.append((None, (tail / scale) ** (1.0 / sampling.temperature)))
    total = sum(w for _, w in weights)
    weights = [(token, w / total) for token, w in weights]
    if sampling.top_p < 1.0:  # nucleus: keep tokens while the mass before them is below top_p; renormalise
        kept, before = [], 0.0
        for token, w in weights:
            if before >= sampling.top_p:
                break
            kept.append((token, w))
            before += w
        total = sum(w for _, w in kept)
        weights = [(token, w / total) for token, w in kept]
    share = dict(weights)
    picked = [sum(share.get(token, 0.0) for token in keys) for keys in label_keys]
    return LabelScores(norm, mass, answer_dist=with_invalid(picked)), exact
