"""Position (letter) bias: how often the model chose each displayed slot, against how often the right answer sat there.

A model that answers "A" whatever the question scores the share of questions whose answer is A, and its answers
agree with each other across repetitions: its SURE-right share and RWS then describe a letter habit. These metrics
say so (docs/metrics.md, "Position bias"). Slots are named A, B, C ... in display order whatever the label style
(`prompt.label_style=1.`: slot A is label 1). Only multiple-choice trials (`fmt` mcq) with a parsed answer count:
the chosen slot is the parsed label's position, the right slot the correct label's, over the same trials.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .fluctuation import PRIOR_PREFIX
from .intervals import percentile_interval, resample_chunks, wilson_interval
from .slot_choices import SLOT_NAMES, slot_trials

SLOT_SHARE = "slot_share_"  # slot_share_A: share of the valid choices in slot A
SLOT_CORRECT = "slot_correct_"  # slot_correct_A: share of the same trials whose right answer is in slot A
SLOT_BIAS_MAX = "slot_bias_max"  # the most chosen slot's share minus its right share
SLOT_BIAS_FLAG = "slot_bias_flag"  # 1.0 where the most chosen slot is far above its right share (FAR_MARGIN)
SLOT_CHOICES = "n_slot_choices"  # the valid choices counted
SLOT_LEVEL = 0.95  # the interval the flag reads, fixed so that "far" means one thing in every run
# "Far": the lower bound of the most chosen slot's 95% interval lies more than this above the share of right answers
# in that slot. 0.10 is a habit no sampling error explains: SmolLM2-135M at T=0.3 chose A 127 of 158 times where 20%
# of the right answers are A (lower bound 0.73); a model that follows the answers leaves its top slot within a few
# points of the right share.
FAR_MARGIN = 0.10
SLOT_RESAMPLES = 1000  # cluster bootstrap resamples where a question gave more than one valid choice
SLOT_TAG = "slot_bias"  # the run's tag: the most chosen slot against its right share, and the verdict
PRIOR_TAG = "pride_prior"  # the run's tag: PriDe's estimated position prior (`prior_text`), where the run has one


def _share_intervals(trials: pd.DataFrame, n_slots: int, *, seed: int) -> list[tuple[float, float]]:
    """Each slot's chosen-share interval: Wilson where every question gave one choice, else a percentile interval
    from a cluster bootstrap over questions (every choice of a question moves with it: repetitions and variants of
    one question are not independent)."""
    n = len(trials)
    per_question = trials.groupby("question_id", sort=True)
    if per_question.ngroups == n:
        counts = np.bincount(trials["chosen"], minlength=n_slots)
        return [wilson_interval(float(c), float(n), SLOT_LEVEL) for c in counts]
    chosen = pd.crosstab(trials["question_id"], trials["chosen"]).reindex(columns=range(n_slots), fill_value=0)
    made = chosen.sum(axis=1).to_numpy(dtype=float)
    matrix = chosen.to_numpy(dtype=float)
    values = []
    for weights in resample_chunks(len(made), SLOT_RESAMPLES, seed):
        with np.errstate(invalid="ignore", divide="ignore"):
            values.append((weights @ matrix) / (weights @ made)[:, None])
    resampled = np.concatenate(values)
    out = []
    for slot in range(n_slots):
        bounds = percentile_interval(resampled[:, slot], SLOT_LEVEL)
        out.append(bounds if bounds is not None else (float("nan"), float("nan")))
    return out


def slot_metrics(records: pd.DataFrame, *, slot_seed: int = 0) -> dict[str, float]:
    """Per displayed slot S (A, B, ... up to the most options shown): `slot_share_S` (share of the valid choices,
    with `_lo`/`_hi` at 95%), `slot_correct_S` (share of the same trials whose right answer is in S); then
    `slot_bias_max` (the most chosen slot's share minus its right share), `slot_bias_flag` (1 when the lower bound
    of that share exceeds the right share by more than FAR_MARGIN, else 0) and `n_slot_choices`. {} without a valid
    multiple-choice answer. `compute_metrics` keeps the bounds only where it logs intervals (`intervals` > 0).

    >>> table = pd.DataFrame({"question_id": [f"q{i}" for i in range(40)], "parsed_label": "A", "n_options": 4,
    ...                       "correct_label": [("A", "B", "C", "D")[i % 4] for i in range(40)]})
    >>> m = slot_metrics(table)
    >>> m["slot_share_A"], m["slot_correct_A"], m["slot_bias_max"], m["slot_bias_flag"]
    (1.0, 0.25, 0.75, 1.0)
    """
    trials = slot_trials(records)
    if trials.empty:
        return {}
    n_slots = int(max(trials["chosen"].max(), trials["right"].max())) + 1
    if "n_options" in records.columns and records["n_options"].notna().any():
        n_slots = max(n_slots, min(int(pd.to_numeric(records["n_options"], errors="coerce").max()), len(SLOT_NAMES)))
    n = len(trials)
    chosen = np.bincount(trials["chosen"], minlength=n_slots) / n
    right = np.bincount(trials["right"], minlength=n_slots) / n
    bounds = _share_intervals(trials, n_slots, seed=slot_seed)
    out: dict[str, float] = {}
    for slot in range(n_slots):
        name = f"{SLOT_SHARE}{SLOT_NAMES[slot]}"
        out[name] = float(chosen[slot])
        out[f"{name}_lo"], out[f"{name}_hi"] = bounds[slot]
        out[f"{SLOT_CORRECT}{SLOT_NAMES[slot]}"] = float(right[slot])
    top = int(np.argmax(chosen))
    out[SLOT_BIAS_MAX] = float(chosen[top] - right[top])
    out[SLOT_BIAS_FLAG] = float(bounds[top][0] - right[top] > FAR_MARGIN)
    out[SLOT_CHOICES] = float(n)
    return out


def most_chosen(metrics: dict[str, float] | pd.Series) -> str | None:
    """The slot name with the largest `slot_share_S` among `metrics`, None without slot metrics."""
    shares = {
        name[len(SLOT_SHARE) :]: float(value)
        for name, value in dict(metrics).items()
        if name.startswith(SLOT_SHARE) and not name.endswith(("_lo", "_hi")) and value == value
    }
    return max(shares, key=lambda slot: (shares[slot], -SLOT_NAMES.index(slot))) if shares else None


def slot_flagged(metrics: dict[str, float]) -> bool:
    """Whether the run's most chosen slot is far above its share of right answers (`slot_bias_flag`)."""
    return float(metrics.get(SLOT_BIAS_FLAG, 0.0)) == 1.0


def slot_summary(metrics: dict[str, float]) -> str | None:
    """One line on the most chosen slot: `A chosen 0.804 [0.735, 0.858] of 158 valid answers, right answer in A
    0.203: far above (a letter habit)`; None without slot metrics.

    >>> slot_summary({"slot_share_A": 0.8, "slot_share_A_lo": 0.73, "slot_share_A_hi": 0.86, "slot_correct_A": 0.2,
    ...               "slot_share_B": 0.2, "slot_bias_flag": 1.0, "n_slot_choices": 158})
    'A chosen 0.800 [0.730, 0.860] of 158 valid answers, right answer in A 0.200: far above (a letter habit)'
    """
    slot = most_chosen(metrics)
    if slot is None:
        return None
    share, lo, hi = (metrics.get(f"{SLOT_SHARE}{slot}{end}", float("nan")) for end in ("", "_lo", "_hi"))
    right = metrics.get(f"{SLOT_CORRECT}{slot}", float("nan"))
    verdict = "far above (a letter habit)" if slot_flagged(metrics) else "not far above"
    n = int(metrics.get(SLOT_CHOICES, 0))
    bounds = f" [{lo:.3f}, {hi:.3f}]" if lo == lo and hi == hi else ""  # none logged under stats.bootstrap=0
    return f"{slot} chosen {share:.3f}{bounds} of {n} valid answers, right answer in {slot} {right:.3f}: {verdict}"


def slot_tag(metrics: dict[str, float]) -> str | None:
    """The run's `slot_bias` tag, short enough for a 100-px column (value first): `A 0.804 vs 0.203 right: far
    above`; None without slot metrics.

    >>> slot_tag({"slot_share_A": 0.8, "slot_correct_A": 0.2, "slot_share_B": 0.2, "slot_bias_flag": 0.0})
    'A 0.800 vs 0.200 right: not far above'
    """
    slot = most_chosen(metrics)
    if slot is None:
        return None
    verdict = "far above" if slot_flagged(metrics) else "not far above"
    share, right = metrics[f"{SLOT_SHARE}{slot}"], metrics.get(f"{SLOT_CORRECT}{slot}", float("nan"))
    return f"{slot} {share:.3f} vs {right:.3f} right: {verdict}"


def prior_text(metrics: dict[str, float] | pd.Series) -> str | None:
    """PriDe's estimated position prior (`pride_prior_<slot>`, src/metrics/fluctuation.py) in one line, slot then
    share at two decimals: what the report's position-bias table, the run's `pride_prior` tag and the review view
    show; None where the run has none (no cyclic set scored with label probabilities).

    >>> prior_text({"pride_prior_A": 0.213, "pride_prior_B": 0.5, "pride_prior_C": 0.287, "slot_share_A": 0.9})
    'A 0.21 B 0.50 C 0.29'
    >>> prior_text({"slot_share_A": 0.9}) is None
    True
    """
    values = dict(metrics)
    shown = []
    for slot in SLOT_NAMES:
        value = values.get(f"{PRIOR_PREFIX}{slot}")
        if isinstance(value, (int, float)) and value == value:  # NaN: a runs-table cell of a run without one
            shown.append(f"{slot} {float(value):.2f}")
    return " ".join(shown) if shown else None
