"""Which metric families records hold the inputs for, each family's headline metrics, and each family's metrics
stated per question (src/metrics/per_question.py).

Below `src.metrics` (which computes the families) and `src.metrics.intervals` (which resamples the headline
metrics): both read these rules, written once here.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from src.core.variant import CORA_ALTERED_KINDS, REVAS_KINDS

from .answers import ORIGINAL
from .cora import cora_statistics, mcqa_statistics
from .fluctuation import fluctuation_statistics
from .per_question import PerQuestion
from .repetition import repetition_statistics
from .revas import revas_statistics
from .slot_choices import slot_trials

# Per-subject breakdown (`<name>/<subject>`): the headline metrics of each family
HEADLINE_METRICS = (
    "mcqa",
    "mcqa_plus",
    "bmca_1.0",
    "cora",
    "rws",
    "st",
    "acc_mean",
    "sc_mean",
    "acc_h",
    "nota_acc",
    "nota_acc_h",
    "tf_correct_yes",
    "tf_distractor_no",
    "recall_correct",
    "misleading_fix_rate",
    "full_fr",
)
HEADLINE_PREFIXES = ("acc@", "acc_h@", "wacc@", "aacc@")


def applicable_families(records: pd.DataFrame) -> list[str]:
    """The families whose inputs the records hold.

    - `mcqa`: an `original` variant exists;
    - `cora`: an `original` variant and one of CoRA's altered kinds (shuffled, nota, decoupled, ...), so that
      REVAS re-orders and permutation sets, which also hold the original order, are not read as divergent sets.
      A run of the original order alone (`variants=original`) measures no consistency: there the family's
      definitions would give mcqa_plus = mv = bmca_c = cora = mcqa and ci = 1 by construction, so it is not
      computed (docs/validity.md, "What each variant set measures");
    - `repetition`: max(repetition) >= 1;
    - `fluctuation`: a `perm_set` column, or permutation-set memberships in `perm_sets`;
    - `revas`: a REVAS variant kind (reorder, more_options, ..., misleading_replaced);
    - `expected`: max(repetition) >= 1 and an `answer_dist` (exact first-token sampling) in the records;
    - `slots`: a multiple-choice trial with a parsed label (position bias, src/metrics/slots.py).
    """
    if records.empty:
        return []
    kinds = set(records["variant_kind"].dropna())
    chosen = []
    if ORIGINAL in kinds:
        chosen.append("mcqa")
        if kinds & CORA_ALTERED_KINDS:
            chosen.append("cora")
    if int(records["repetition"].max()) >= 1:
        chosen.append("repetition")
    if "perm_set" in records.columns or _has_memberships(records):
        chosen.append("fluctuation")
    if kinds & set(REVAS_KINDS):
        chosen.append("revas")
    if "repetition" in chosen and "answer_dist" in records.columns and records["answer_dist"].notna().any():
        chosen.append("expected")
    if not slot_trials(records).empty:
        chosen.append("slots")
    return chosen


def _memberships(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(item) for item in value]


def _has_memberships(records: pd.DataFrame) -> bool:
    return "perm_sets" in records.columns and bool(records["perm_sets"].map(lambda v: len(_memberships(v)) > 0).any())


def tidy_permutations(records: pd.DataFrame) -> pd.DataFrame:
    """The tidy rows the fluctuation family reads: one row per (trial, permutation set it belongs to), with
    `perm_set` and `perm_pos` parsed from the records' `perm_sets` ("cyclic:2"). Records that already have a
    `perm_set` column, or no memberships, are returned as they are.

    >>> df = pd.DataFrame({"question_id": ["q"], "perm_sets": [["original:0", "cyclic:0"]]})
    >>> tidy_permutations(df)[["perm_set", "perm_pos"]].values.tolist()
    [['original', 0], ['cyclic', 0]]
    """
    if "perm_set" in records.columns or not _has_memberships(records):
        return records
    members = records["perm_sets"].map(_memberships)
    rows = records[members.map(len) > 0].assign(_membership=members).explode("_membership")
    split = rows["_membership"].str.rsplit(":", n=1)
    rows = rows.assign(perm_set=split.str[0], perm_pos=split.str[1].astype(int)).drop(columns="_membership")
    return rows.reset_index(drop=True)


def metric_subject(subject: str) -> str:
    """A subject as MLflow accepts it inside a metric name ("step2&3" -> "step2_3")."""
    return re.sub(r"[^\w.\- ]", "_", str(subject))


# Each family whose metrics are means or ratios over questions, and the function stating them per question: their
# values, their intervals (src/metrics/intervals.py) and their paired tests (src/metrics/paired.py) all come from
# it. The expected family has none: its metrics are expectations under a sampled answer distribution.
FAMILY_STATISTICS: dict[str, Callable[..., dict[str, PerQuestion]]] = {
    "mcqa": mcqa_statistics,
    "cora": cora_statistics,
    "repetition": repetition_statistics,
    "fluctuation": fluctuation_statistics,
    "revas": revas_statistics,
}


def keyword_options(fn: Callable[..., Any]) -> set[str]:
    """The keyword-only parameters of a family function: the metric options (`compute_metrics`) it takes."""
    return {
        name for name, param in inspect.signature(fn).parameters.items() if param.kind is inspect.Parameter.KEYWORD_ONLY
    }


def family_input(family: str, records: pd.DataFrame) -> pd.DataFrame:
    """The table a family reads: the fluctuation family its tidy rows (`tidy_permutations`), every other the records."""
    return tidy_permutations(records) if family == "fluctuation" else records


def call_family(fn: Callable[..., Any], family: str, records: pd.DataFrame, options: Mapping[str, Any]) -> Any:
    """`fn` (a family's metrics or statistics) on the family's input, with the options it takes."""
    wanted = keyword_options(fn)
    return fn(family_input(family, records), **{key: value for key, value in options.items() if key in wanted})


def headline_statistics(
    records: pd.DataFrame, families: Sequence[str], options: Mapping[str, Any]
) -> dict[str, PerQuestion]:
    """The per-question statements of the headline metrics (HEADLINE_METRICS, HEADLINE_PREFIXES) of `families`
    on `records`, in the families' order (a later family's statement of a name replaces an earlier one's)."""
    found: dict[str, PerQuestion] = {}
    for family in families:
        if family in FAMILY_STATISTICS:
            found.update(call_family(FAMILY_STATISTICS[family], family, records, options))
    return {
        name: statement
        for name, statement in found.items()
        if name in HEADLINE_METRICS or name.startswith(HEADLINE_PREFIXES)
    }
