"""Chance level: the accuracy of a guesser that picks uniformly among what each trial lets it answer.

One rule for every table and plot of the report (`src.compare`):

- a multiple-choice trial with k displayed options (NOTA and fillers included): 1/k;
- a true/false trial (`fmt` true_false): 1/2;
- a multi-select trial with k options (`fmt` multi_select): the guesser names a non-empty set of labels
  uniformly at random, and is right only when it names exactly the right option: 1/(2^k - 1).

Questions weigh equally, as in every metric: a question's chance is the mean over its trials, the run's the
mean over its questions. `chance_levels` gives it on the reference order (what MCQA, acc mean and the accuracy
on the original order are measured on) and over every variant (what MCQA+ and average accuracies are
measured on); with one option count everywhere the two are equal.
"""
from __future__ import annotations

import math

import pandas as pd

from .answers import ORIGINAL

CHANCE_NAMES = {"chance": "on the reference order", "chance_variants": "over every variant"}


def trial_chance(n_options: int, fmt: str = "mcq") -> float:
    """The chance of guessing one trial right.

    >>> trial_chance(4), trial_chance(1, "true_false"), trial_chance(3, "multi_select")
    (0.25, 0.5, 0.14285714285714285)
    """
    if fmt == "true_false":
        return 0.5
    k = int(n_options)
    if k < 1:
        return math.nan
    if fmt == "multi_select":
        return 1.0 / (2 ** k - 1)
    return 1.0 / k


def option_count_chance(n: int) -> float:
    """The chance of REVAS `acc@n` (n options shown): 1/n."""
    return 1.0 / n


def chance_levels(records: pd.DataFrame) -> dict[str, float]:
    """`chance` (reference order: the `original` variant where asked, else each question's first variant) and
    `chance_variants` (every variant), each the mean over questions of the mean 1/k over the question's trials.

    >>> r = pd.DataFrame({"question_id": ["a", "a", "b", "b"], "variant_kind": ["original", "decoupled"] * 2,
    ...                   "variant_id": ["original", "d1"] * 2, "n_options": [4, 2, 5, 2]})
    >>> {k: round(v, 3) for k, v in chance_levels(r).items()}
    {'chance': 0.225, 'chance_variants': 0.362}
    """
    if records.empty or "n_options" not in records.columns:
        return {}
    fmts = records["fmt"].fillna("mcq") if "fmt" in records.columns else pd.Series("mcq", index=records.index)
    frame = pd.DataFrame({"question_id": records["question_id"].astype(str).to_numpy(),
                          "variant_id": records["variant_id"].astype(str).to_numpy(),
                          "original": (records["variant_kind"] == ORIGINAL).to_numpy(),
                          "chance": [trial_chance(k, f) for k, f in zip(records["n_options"], fmts)]})
    frame = frame.drop_duplicates(["question_id", "variant_id"])  # repetitions ask the same trial again
    every = frame.groupby("question_id", sort=False)["chance"].mean()
    reference = frame[frame["original"]]
    if reference.empty:  # REVAS re-orders, permutation sets: the first variant each question was asked in
        reference = frame.groupby("question_id", sort=False).head(1)
    first = reference.groupby("question_id", sort=False)["chance"].mean()
    return {"chance": float(first.mean()), "chance_variants": float(every.mean())}
