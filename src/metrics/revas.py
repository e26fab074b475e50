"""REVAS family (REVAS paper, sections 3-4): consistency over re-orders, option counts, NOTA, true/false,
multi-select and misleading-option replacement.

Reads repetition 0. Orders of one displayed list are told apart by the trailing `_<j>` of `variant_id`
(j = 0: the reference order, the first shown). Answers are option identities, INVALID its own answer.
What each variant set logs:

- reorders (kinds `original` + `reorder`, base level): `sc_mean`, `acc_h`, `sc_bin_<j>_of_<k>_share`
  and `sc_bin_<j>_of_<k>_acc` (the paper's Table 2: share of questions whose most frequent answer has j
  of k votes, and the share of those whose unique most frequent answer is right; no accuracy for j = 1,
  where no answer repeats: the paper's N/A);
- option counts (`variant_level` n): `acc@n` (reference order), `sc_mean@n`, `acc_h@n`;
- `nota_replaces_correct`: `nota_acc` (reference order), `nota_acc_h` (every order);
- `true_false`: `tf_correct_yes` (share of correct options affirmed) and `tf_distractor_no` (share of
  distractors denied, per question, then averaged) on the paper's subset: the questions answered right on
  every reorder of the same run (sc = 1 and right), with `tf_subset_share` its share of the questions.
  The same over every question is logged as `tf_correct_yes_all` / `tf_distractor_no_all`, the only tf
  names a run without reorders (`with_reorder: false`) has. With label probabilities (scoring=logprob)
  `conf_correct` (mean p(Yes) on the correct option), `conf_distractor` (mean over questions of the
  highest p(Yes) among distractors) and `conf_ratio` = conf_distractor / conf_correct, same subset
  rule and `_all` names. p(Yes) is renormalised over {Yes, No}.
- `multi_select`, on the questions whose original-order answer was a wrong option (INVALID left out:
  it names no misleading option): `multi_rate` (named two or more labels), `recall_correct` (named the
  correct option), `recall_misleading` (named the option it chose before);
- `misleading_replaced`: `misleading_fix_rate`, share of those questions now answered right.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

import numpy as np
import pandas as pd

from src.core.variant import MISLEADING_REPLACED, NOTA_REPLACES_CORRECT, REORDER

from ..answer_formats import FORMATS, MCQ
from .answers import ORIGINAL, answer_keys, correct_flags, first_repetition
from .per_question import PerQuestion, mean_of, values_of

_POSITION = re.compile(r"_(\d+)$")


def _column(rows: pd.DataFrame, name: str, default: Any) -> pd.Series:
    return rows[name] if name in rows.columns else pd.Series(default, index=rows.index, dtype=object)


def _in_family(rows: pd.DataFrame, family: str) -> pd.Series:
    """Which rows are in an answer format whose metric family is `family` (a row without a format is mcq)."""
    names = [f.name for f in FORMATS.values() if f.metric_family == family]
    return _column(rows, "fmt", MCQ.name).fillna(MCQ.name).isin(names)


def _positions(rows: pd.DataFrame) -> np.ndarray:
    """j of each row's variant_id "<prefix>_<j>" (0 when it has none, e.g. "original")."""
    return np.array([int(m.group(1)) if (m := _POSITION.search(str(v))) else 0 for v in rows["variant_id"]], dtype=int)


def _as_list(value: Any) -> list[Any]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return list(value)


def order_outcomes(rows: pd.DataFrame) -> pd.DataFrame:
    """Per question over its orders (one row each): k, n_max, sc, acc_h, ref_right, mode_right.

    `mode_right`: the correct option is the one most frequent answer (no tie).

    >>> rows = pd.DataFrame({"question_id": "q", "variant_id": ["r_0", "r_1", "r_2", "r_3"],
    ...     "parsed_label": ["A", "B", "A", "C"], "chosen_option": [0, 1, 0, 2], "correct": [True, False, True, False]})
    >>> o = order_outcomes(rows).loc["q"]
    >>> int(o.k), int(o.n_max), float(o.sc), bool(o.acc_h), bool(o.ref_right), bool(o.mode_right)
    (4, 2, 0.5, False, True, True)
    """
    frame = pd.DataFrame(
        {
            "question_id": rows["question_id"].to_numpy(),
            "answer": answer_keys(rows),
            "correct": correct_flags(rows),
            "pos": _positions(rows),
        }
    )
    counts = frame.groupby(["question_id", "answer"]).size()
    n_max = counts.groupby(level="question_id").max()
    n_modes = counts.eq(counts.groupby(level="question_id").transform("max")).groupby(level="question_id").sum()
    grouped = frame.groupby("question_id")
    reference = frame[frame["pos"] == 0].groupby("question_id")["correct"].first()
    out = pd.DataFrame(
        {
            "k": grouped.size(),
            "n_max": n_max,
            "acc_h": grouped["correct"].all(),
            # NaN (as object) for a question whose reference order was not made: acc@n and nota_acc leave it out
            "ref_right": reference.reindex(grouped.size().index).astype(object),
            "n_correct": grouped["correct"].sum(),
        }
    )
    out["sc"] = out["n_max"] / out["k"]
    out["mode_right"] = (out["n_correct"] == out["n_max"]) & (out["n_correct"] > 0) & (n_modes == 1)
    return out


def _reordered(outcomes: pd.DataFrame) -> pd.DataFrame:
    """The questions whose orders can disagree: with two or more orders, when some question has them. A
    question left with one order (the option_refs policy fixes every other slot) says nothing about order
    consistency and would count as sc = 1; a run asked with k = 1 keeps all of its questions."""
    several = outcomes["k"] >= 2
    return outcomes[several] if several.any() else outcomes


def sc_distribution(rows: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2 from one group of orders: per (k, j) the share of questions with sc = j/k and the
    accuracy of their most frequent answer (NaN for j = 1 or an empty bin)."""
    outcomes = _reordered(order_outcomes(rows))
    table = []
    for key, group in outcomes.groupby("k"):
        k = int(cast(int, key))  # the option counts of an int column
        for j in range(k, 0, -1):
            in_bin = group[group["n_max"] == j]
            acc = float(in_bin["mode_right"].mean()) if len(in_bin) and (j > 1 or k == 1) else float("nan")
            table.append({"k": k, "j": j, "share": len(in_bin) / len(group), "acc": acc, "n": len(in_bin)})
    return pd.DataFrame(table, columns=["k", "j", "share", "acc", "n"])


def _reorder_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The base-level orders: kinds original/reorder in mcq format, at no level or the A-option level."""
    level = pd.to_numeric(_column(rows, "variant_level", None), errors="coerce")
    base = level.isna() | (level == pd.to_numeric(rows["n_options"], errors="coerce"))
    return rows[rows["variant_kind"].isin([ORIGINAL, REORDER]) & _in_family(rows, "orders") & base]


def reorder_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`sc_mean` and `acc_h` over the base-level orders, per question (`order_outcomes`); {} without a `reorder`."""
    group = _reorder_rows(rows)
    if not (group["variant_kind"] == REORDER).any():
        return {}
    outcomes = _reordered(order_outcomes(group))
    return {"sc_mean": mean_of(outcomes["sc"]), "acc_h": mean_of(outcomes["acc_h"], share=True)}


def reorder_metrics(rows: pd.DataFrame) -> dict[str, float]:
    """`sc_mean`, `acc_h` and the sc bins over the base-level orders; {} without any `reorder` row."""
    out = values_of(reorder_statistics(rows))
    if not out:
        return {}
    group = _reorder_rows(rows)
    for row in sc_distribution(group).to_dict("records"):
        out[f"sc_bin_{row['j']}_of_{row['k']}_share"] = float(row["share"])
        if not math.isnan(row["acc"]):
            out[f"sc_bin_{row['j']}_of_{row['k']}_acc"] = float(row["acc"])
    return out


def _reference_accuracy(outcomes: pd.DataFrame) -> dict[str, PerQuestion]:
    """Accuracy on the reference order over the questions that have one, under "" ({} when none has)."""
    found = outcomes["ref_right"].dropna()
    return {"": mean_of(found.astype(bool), share=True)} if len(found) else {}


def level_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`acc@n` (reference order), `sc_mean@n`, `acc_h@n` for each option-count level n, per question."""
    level = pd.to_numeric(_column(rows, "variant_level", None), errors="coerce")
    leveled = rows[level.notna() & _in_family(rows, "orders")]
    out: dict[str, PerQuestion] = {}
    for n, group in leveled.groupby(level[leveled.index].astype(int), sort=True):
        outcomes = order_outcomes(group)
        out.update((f"acc@{n}", statement) for statement in _reference_accuracy(outcomes).values())
        reordered = _reordered(outcomes)
        out[f"sc_mean@{n}"] = mean_of(reordered["sc"])
        out[f"acc_h@{n}"] = mean_of(reordered["acc_h"], share=True)
    return out


def level_metrics(rows: pd.DataFrame) -> dict[str, float]:
    """`acc@n`, `sc_mean@n`, `acc_h@n` for each option-count level n."""
    return values_of(level_statistics(rows))


def nota_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`nota_acc_h` over every order of the NOTA-replaces-correct set and `nota_acc` on its reference order."""
    group = rows[rows["variant_kind"] == NOTA_REPLACES_CORRECT]
    if group.empty:
        return {}
    outcomes = order_outcomes(group)
    out = {"nota_acc_h": mean_of(_reordered(outcomes)["acc_h"], share=True)}
    out.update(("nota_acc", statement) for statement in _reference_accuracy(outcomes).values())
    return out


def nota_metrics(rows: pd.DataFrame) -> dict[str, float]:
    """`nota_acc` on the reference order and `nota_acc_h` over every order of the NOTA-replaces-correct set."""
    return dict(sorted(values_of(nota_statistics(rows)).items()))


def _true_false_frame(rows: pd.DataFrame) -> pd.DataFrame:
    tf = rows[_in_family(rows, "true_false")]
    asked = pd.to_numeric(_column(tf, "asked_option", None), errors="coerce")
    if asked.isna().any():  # hand-built tables: the one option shown is the one asked
        asked = asked.fillna(tf["option_order"].map(lambda order: _as_list(order)[0]).astype(float))
    p_yes = [
        (_as_list(p)[0] / sum(_as_list(p))) if len(_as_list(p)) == 2 and sum(_as_list(p)) > 0 else np.nan
        for p in _column(tf, "label_probs", None)
    ]
    return pd.DataFrame(
        {
            "question_id": tf["question_id"].to_numpy(),
            "is_correct": (asked.to_numpy() == pd.to_numeric(tf["correct_option"]).to_numpy()),
            "right": correct_flags(tf),
            "p_yes": np.asarray(p_yes, dtype=float),
        }
    )


def _tf_statistics(frame: pd.DataFrame, suffix: str) -> dict[str, PerQuestion]:
    """`tf_correct_yes`, `tf_distractor_no` (+ `suffix`): per question, its share of right yes/no answers on the
    correct option, on the distractors."""
    correct, distractors = frame[frame["is_correct"]], frame[~frame["is_correct"]]
    out = {}
    if len(correct):
        out[f"tf_correct_yes{suffix}"] = mean_of(correct.groupby("question_id")["right"].mean(), share=True)
    if len(distractors):
        out[f"tf_distractor_no{suffix}"] = mean_of(distractors.groupby("question_id")["right"].mean())
    return out


def _tf_scores(frame: pd.DataFrame, suffix: str) -> dict[str, float]:
    if frame.empty:
        return {}
    correct, distractors = frame[frame["is_correct"]], frame[~frame["is_correct"]]
    out = values_of(_tf_statistics(frame, suffix))
    if len(correct) and len(distractors) and frame["p_yes"].notna().all():
        cc = float(correct.groupby("question_id")["p_yes"].mean().mean())
        cd = float(distractors.groupby("question_id")["p_yes"].max().mean())
        out[f"conf_correct{suffix}"] = cc
        out[f"conf_distractor{suffix}"] = cd
        if cc > 0:
            out[f"conf_ratio{suffix}"] = cd / cc
    return out


def _consistent_questions(rows: pd.DataFrame, frame: pd.DataFrame) -> set[str] | None:
    """The paper's true/false subset: the questions of `frame` answered right on every reorder of the run (sc = 1
    and right); None when the run has no reorders."""
    group = _reorder_rows(rows)
    if not (group["variant_kind"] == REORDER).any():
        return None
    outcomes = _reordered(order_outcomes(group[group["question_id"].isin(frame["question_id"])]))
    return set(outcomes.index[outcomes["acc_h"]])


def true_false_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`tf_correct_yes`, `tf_distractor_no` on the paper's subset (needs reorders in the run), per question."""
    if not _in_family(rows, "true_false").any():
        return {}
    frame = _true_false_frame(rows)
    consistent = _consistent_questions(rows, frame)
    return {} if consistent is None else _tf_statistics(frame[frame["question_id"].isin(consistent)], "")


def true_false_metrics(rows: pd.DataFrame) -> dict[str, float]:
    """tf_* and conf_* on the sc = 1 and right subset (needs reorders in the run) and `_all` over every question."""
    if not _in_family(rows, "true_false").any():
        return {}
    frame = _true_false_frame(rows)
    out = _tf_scores(frame, "_all")
    consistent = _consistent_questions(rows, frame)
    if consistent is not None:
        out["tf_subset_share"] = len(consistent) / frame["question_id"].nunique()
        out.update(_tf_scores(frame[frame["question_id"].isin(consistent)], ""))
    return out


def multi_select_per_question(rows: pd.DataFrame) -> pd.DataFrame | None:
    """Per question answered with a wrong option on its original order, the share of its select-all answers that
    named several labels (`multi`), the correct option (`correct`) and the option it chose before
    (`misleading`); None when there is no such question. (Also the per-question input of the intervals.)"""
    multi = rows[_in_family(rows, "multi_select")]
    if multi.empty:
        return None
    original = rows[(rows["variant_kind"] == ORIGINAL) & _in_family(rows, "orders")]
    keys = pd.Series(answer_keys(original), index=original["question_id"].to_numpy())
    right = pd.Series(correct_flags(original), index=original["question_id"].to_numpy())
    misleading = keys[(keys >= 0) & ~right]
    misleading = misleading[~misleading.index.duplicated()]
    multi = multi[multi["question_id"].isin(misleading.index)]
    if multi.empty:
        return None
    named = [_as_list(v) for v in _column(multi, "chosen_options", None)]
    return (
        pd.DataFrame(
            {
                "question_id": multi["question_id"].to_numpy(),
                "multi": [len(v) >= 2 for v in named],
                "correct": [int(c) in {int(x) for x in v} for c, v in zip(multi["correct_option"], named)],
                "misleading": [int(misleading[q]) in {int(x) for x in v} for q, v in zip(multi["question_id"], named)],
            }
        )
        .groupby("question_id")
        .mean()
    )


def multi_select_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`multi_rate`, `recall_correct`, `recall_misleading` per question (`multi_select_per_question`)."""
    per_question = multi_select_per_question(rows)
    if per_question is None:
        return {}
    return {
        "multi_rate": mean_of(per_question["multi"]),
        "recall_correct": mean_of(per_question["correct"], share=True),
        "recall_misleading": mean_of(per_question["misleading"]),
    }


def multi_select_metrics(rows: pd.DataFrame) -> dict[str, float]:
    """`multi_rate`, `recall_correct`, `recall_misleading` over the questions answered with a wrong option on
    their original order; {} when there is none."""
    return values_of(multi_select_statistics(rows))


def misleading_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`misleading_fix_rate` per re-asked (originally wrong) question: its share of right answers now."""
    group = rows[rows["variant_kind"] == MISLEADING_REPLACED]
    if group.empty:
        return {}
    per_question = pd.Series(correct_flags(group), index=group["question_id"].to_numpy()).groupby(level=0).mean()
    return {"misleading_fix_rate": mean_of(per_question, share=True)}


def misleading_metrics(rows: pd.DataFrame) -> dict[str, float]:
    """`misleading_fix_rate`: share of the re-asked (originally wrong) questions now answered right."""
    return values_of(misleading_statistics(rows))


# The metrics of each answer format's rows, by `AnswerFormat.metric_family`.
FAMILIES = {
    "orders": (reorder_metrics, level_metrics),
    "true_false": (true_false_metrics,),
    "multi_select": (multi_select_metrics,),
}


def revas_statistics(records: pd.DataFrame) -> dict[str, PerQuestion]:
    """Every REVAS metric that is a mean over questions, stated per question (the parts' `*_statistics`)."""
    if records.empty:
        return {}
    rows = first_repetition(records)
    out: dict[str, PerQuestion] = {}
    for part in (
        reorder_statistics,
        level_statistics,
        nota_statistics,
        true_false_statistics,
        multi_select_statistics,
        misleading_statistics,
    ):
        out.update(part(rows))
    return out


def revas_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Every REVAS metric the records support (see the module docstring); {} for none.

    >>> rows = pd.DataFrame({"question_id": ["q"] * 2, "variant_kind": ["original", "reorder"],
    ...     "variant_id": ["reorder_0", "reorder_1"], "repetition": 0, "n_options": 2,
    ...     "parsed_label": ["A", "A"], "chosen_option": [0, 1], "correct": [True, False]})
    >>> m = revas_metrics(rows)
    >>> m["sc_mean"], m["acc_h"], m["sc_bin_1_of_2_share"]
    (0.5, 0.0, 1.0)
    """
    if records.empty:
        return {}
    rows = first_repetition(records)
    out: dict[str, float] = {}
    families = [part for fmt in FORMATS.values() if fmt.metric_family for part in FAMILIES[fmt.metric_family]]
    for part in (*families, nota_metrics, misleading_metrics):  # nota and misleading: by variant kind
        out.update(part(rows))
    return dict(sorted(out.items()))
