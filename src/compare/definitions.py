"""The report's definitions table: one line per accuracy-like number its tables show, defined once."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from .tables.common import Table

# Each accuracy-like column or row label a table may show, defined once (words from docs/metrics.md)
DEFINITIONS = (
    (("accuracy",), "share of all trials answered right (every variant and repetition), INVALID counted wrong"),
    (
        ("MCQA", "mcqa", "Acc (original order)"),
        "accuracy on the original order of the options (repetition 0), each question once",
    ),
    (
        ("MCQA+", "mcqa_plus"),
        "accuracy over every variant of the divergent set, each question weighted once (CoRA paper)",
    ),
    (("MV", "mv"), "share of questions right by majority vote over their variants"),
    (("BMCA(c)",), "share of questions right on at least a share c of their variants; BMCA(1.0): right on every one"),
    (
        ("CI", "ci"),
        "consistency index, 1 − (MCQA − BMCA(1.0)): 1 when every question right on the original order is "
        "right on all its variants",
    ),
    (("CoRA", "cora"), "consistency-rebalanced accuracy, MCQA × CI (CoRA paper)"),
    (
        ("acc mean", "acc_mean"),
        "mean of the R per-repetition accuracies, each over the trials of that repetition (repetition paper)",
    ),
    (
        ("acc std", "acc stdev", "acc_std"),
        "sample standard deviation (ddof = 1) of the R per-repetition accuracies (repetition paper's accuracy stdev)",
    ),
    (
        ("SURE right", "RWS | S/T", "RWS", "S/T", "rws", "st"),
        "SURE/UNSURE: a question is SURE when its most frequent answer reaches p* of R repetitions; RWS = right when "
        "SURE, S/T = share SURE (repetition paper)",
    ),
    (("Acc",), "REVAS: accuracy on the reference order of the n options shown"),
    (("Acc-H", "acc_h"), "REVAS hard accuracy: share of questions right on every one of the k orders"),
    (("Sc",), "REVAS self-consistency: per question, the share of the k orders giving the most frequent answer"),
    (("NOTA Acc",), "accuracy when NOTA has replaced the right option and is the answer (REVAS)"),
    (
        ("aacc", "wacc", "sacc"),
        "answer-fluctuation paper: aacc = mean accuracy over the orders of a permutation "
        "set; wacc (worst accuracy) = right on every order; sacc = right on the reference "
        "order, weighted by agreement",
    ),
    (
        ("chance",),
        "the accuracy of a uniform guesser on the same questions: 1/k for k options shown, 1/2 for "
        "true/false, 1/(2^k − 1) for multi-select; each question weighted once (src/metrics/chance.py); "
        "the dashed black line on every plot",
    ),
    (
        ("INVALID", "invalid_rate"),
        "share of trials whose answer could not be parsed; kept apart from wrong answers "
        "in the tables (their own column or row) and plots (hatched grey), though every "
        "accuracy counts them wrong",
    ),
)


def _shown_labels(tables: Iterable[Table]) -> set[str]:
    """Every column header, row label, `model · measure` measure and `metric` cell of `tables`, each also without
    its qualifier (`acc mean [95%]` -> `acc mean`, `chance (MCQA)` -> `chance`)."""
    found: set[str] = set()
    for table in tables:
        found.update(str(c) for c in table.text.columns)
        found.update(str(v).split(" · ")[-1] for v in table.text.index)
        if "metric" in table.text.columns:
            found.update(str(v) for v in table.text["metric"])
    labels = found | {re.split(r" [\[(]|@", label)[0] for label in found}
    if any(label.startswith(("BMCA(", "bmca_")) for label in labels):
        labels.add("BMCA(c)")
    return labels


def definitions_table(tables: Iterable[Table]) -> Table:
    """One line per accuracy-like number `tables` (the report's) show."""
    shown = _shown_labels(tables)
    rows = [(" / ".join(n for n in names if n in shown), words) for names, words in DEFINITIONS if shown & set(names)]
    text = pd.DataFrame(
        {"definition": [words for _, words in rows]}, index=pd.Index([names for names, _ in rows], name="number")
    )
    return Table(
        title="What each number is",
        data=text.reset_index(),
        text=text,
        name="definitions",
        prose=True,
        caption="every accuracy-like number on this page, defined once (formulas and papers: docs/metrics.md)",
    )
