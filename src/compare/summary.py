"""The report's first screen: one bottom line per benchmark, then the table it is read from.

Per benchmark and condition (the paired differences' grouping: runs that differ only in the model), the models
ranked by the condition's headline (`src.metrics.chance.HEADLINE_RULE`: acc mean, the mean over repetitions, in
runs with repetitions, never one sampled draw; else MCQA; else accuracy; `tables.common.ranked`, the order of the
paired tables too), the first and the second with their intervals, the paired difference first − second (the one
convention of every difference shown: leader − runner-up, `src.metrics.display.MINUS`) with its 95% interval and
its Holm-adjusted p-value from the paired study (`src.compare.paired`) on that same metric.

A verdict joins every fact it rests on. The first is named the one to pick only where that p is below alpha and
some model is above chance on the headline; where every model is at or below chance no model is picked, and the
bottom line says so first, with each model's interval, then the difference and its cause; otherwise it is a tie and
no model is named (also where the two values are equal at the shown precision). A lead that comes mostly from the
runner-up's INVALID answers (`Decision.invalid_lead`) is said to, beside the pick, the tie or the difference. Every
model's verdict against chance on the headline (above, indistinguishable from, below) is named in the bottom line
and in the summary's `vs chance` column, and a model whose interval contains chance is marked †
(`tables.AT_CHANCE_NOTE`); every run whose INVALID share is above `INVALID_FLAG` is named in the bottom line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from src.metrics.chance import AT_CHANCE, HEADLINE_RULE, INVALID_FLAG, invalid_flag, invalid_lead, verdict_of
from src.metrics.display import cell, difference_cell, fmt, minus, signed
from src.metrics.paired import PairedDifference, QuestionsVerdict

from .load import Runs, benchmark_size
from .paired import PairedStudy
from .tables.common import (
    AT_CHANCE_NOTE,
    Built,
    RunRow,
    Table,
    condition_groups,
    judged_cell,
    latest,
    p_text,
    ranked,
    run_rows,
)

TITLE = "Summary: which model to pick on each benchmark"
BOTTOM_TITLE = "Bottom line"
TIE = "tie"
UNDECIDED = "undecided against chance (no interval or no chance level logged)"
SHORT_VERDICTS = {"above chance": "above", "below chance": "below", UNDECIDED: "undecided"}  # the table's words


def _holm(study: PairedStudy | None, run_a: str, run_b: str, metric: str) -> float | None:
    """The Holm-adjusted p of the paired difference of `metric` between two runs (either order), or None."""
    for table in study.differences.tables if study is not None else ():
        data = table.data
        hit = data[
            (data["metric"] == metric)
            & (
                ((data["run_a"] == run_a) & (data["run_b"] == run_b))
                | ((data["run_a"] == run_b) & (data["run_b"] == run_a))
            )
        ]
        if len(hit):
            value = hit["p_holm"].iloc[0]
            return None if value is None or value != value else float(value)
    return None


@dataclass
class Decision:
    """One benchmark and condition: its headline metric, every model ranked by it, the first two's paired
    difference (first − second, `src.metrics.display.MINUS`)."""

    benchmark: str
    label: str
    metric: str
    ranked: list[RunRow]
    found: PairedDifference | None
    p_holm: float | None
    alpha: float

    @property
    def first(self) -> RunRow:
        return self.ranked[0]

    @property
    def second(self) -> RunRow:
        return self.ranked[1]

    @property
    def equal(self) -> bool:
        return fmt(self.first[self.metric]) == fmt(self.second[self.metric])

    @property
    def tie(self) -> bool:
        return self.equal or self.p_holm is None or self.p_holm >= self.alpha

    @property
    def none_above(self) -> bool:
        """Every model is at or below chance on the headline (each one judged: an interval and a chance level): no
        model is worth picking, whatever the difference between them."""
        words = [verdict for _, verdict in self.chance_verdicts()]
        return all(w in (AT_CHANCE, "below chance") for w in words)

    @property
    def pick(self) -> bool:
        """A leader is named: its lead is significant and some model is above chance."""
        return not self.tie and not self.none_above

    @property
    def where(self) -> str:
        return self.benchmark + (f" ({self.label})" if self.label else "")

    @property
    def models(self) -> str:
        return "neither model" if len(self.ranked) == 2 else "no model"

    def verdict(self) -> str:
        if self.none_above:
            return f"no pick: {self.models} above chance"
        if self.equal:
            return f"{TIE} (equal): no leader"
        if self.p_holm is None:
            return f"{TIE}? (no paired test): no leader"
        if self.tie:
            return f"{TIE} (p ≥ {self.alpha:g}): no leader"
        mostly = f"; lead mostly {self.second['model']}'s INVALID" if self.invalid_lead() else ""
        return f"pick {self.first['model']} (p < {self.alpha:g}{mostly})"

    def chance_verdicts(self) -> list[tuple[str, str]]:
        """(model, `above chance` | `indistinguishable from chance` | `below chance` | UNDECIDED) of every model,
        in rank order, on the condition's headline."""
        found = []
        for r in self.ranked:
            verdict = verdict_of(r, self.metric)
            found.append((r["model"], (verdict.short() if verdict is not None else "") or UNDECIDED))
        return found

    def chance_text(self) -> str:
        """`every model is above chance on acc_mean`, or each model's verdict: `smollm2 indistinguishable from
        chance, gemma below chance on acc_mean`."""
        found = self.chance_verdicts()
        if len({verdict for _, verdict in found}) == 1:
            return f"every model is {found[0][1]} on {self.metric}"
        return ", ".join(f"{model} {verdict}" for model, verdict in found) + f" on {self.metric}"

    def chance_cell(self) -> str:
        """The summary's `vs chance` cell: every model's verdict in rank order, `b above, a indistinguishable`."""
        words = {**SHORT_VERDICTS, AT_CHANCE: "indistinguishable"}
        return ", ".join(f"{model} {words.get(verdict, verdict)}" for model, verdict in self.chance_verdicts())

    def invalid_lead(self) -> str:
        """The sentence that says the lead comes mostly from the runner-up's unparsed answers, or ''
        (`src.metrics.chance.invalid_lead`, the rule `src.plan` says it by too)."""
        a, b = self.first, self.second
        return invalid_lead((str(a["model"]), a), (str(b["model"]), b), self.metric)

    def bottom_line(self, *, delta: float, power: float) -> str:
        """The one sentence a reader acts on (module docstring)."""
        if self.none_above:
            text = f"{self.where}: {self._below_chance()}"
        else:
            text = f"{self.where}: " + (self._pick() if self.pick else self._no_pick(delta, power))
            text += "; " + self.chance_text()
        flagged = [f"{r['model']} {r['invalid_rate']:.2f}" for r in self.ranked if invalid_flag(r)]
        if flagged:
            text += f"; INVALID share above {INVALID_FLAG:.2f} (counted wrong): {', '.join(flagged)}"
        return text + "."

    def _difference(self) -> str:
        """`smollm2 − gemma +0.065 [+0.020, +0.110], p_holm 0.006` (the leader first), or why there is none."""
        if self.found is None:
            return "no paired test"
        names = minus(self.first["model"], self.second["model"])
        return f"{names} {difference_cell(self.found)}, p_holm {p_text(self.p_holm)}"

    def _below_chance(self) -> str:
        """No pick: every model at or below chance. Each model with its interval and verdict, then the difference
        and, where it is, its cause (the runner-up's INVALID answers)."""
        judged = []
        for r, (_, verdict) in zip(self.ranked, self.chance_verdicts()):
            judged.append(f"{r['model']} {cell(r, self.metric)} {verdict}")
        chance = sorted({fmt(_number(r.get("chance"))) for r in self.ranked})
        text = (
            f"no pick: {self.models} is above chance on {self.metric} ({', '.join(judged)}; chance "
            f"{', '.join(chance)}); {self._difference()}"
        )
        cause = self.invalid_lead()
        return text + (f", and {cause}" if cause else "")

    def _pick(self) -> str:
        assert self.found is not None  # a pick is made only from a tested difference (not self.tie)
        text = (
            f"pick {self.first['model']} (its lead on {self.metric} over {self.second['model']} is "
            f"{difference_cell(self.found)}, p_holm {p_text(self.p_holm)})"
        )
        cause = self.invalid_lead()
        return text + (f", though {cause}" if cause else "")

    def _no_pick(self, delta: float, power: float) -> str:
        values = ", ".join(f"{r['model']} {fmt(r[self.metric])}" for r in self.ranked)  # every model, in rank order
        p = f", p_holm {p_text(self.p_holm)}" if self.p_holm is not None else ", no paired test"
        text = f"no model is better on these questions ({self.metric}: {values}{p})"
        if self.found is not None and self.found.sd is not None and self.found.sd > 0:
            sizes = [s for s in (benchmark_size(self.first), benchmark_size(self.second)) if s is not None]
            verdict = QuestionsVerdict.of(
                self.found.n_questions,
                self.found.sd,
                min(sizes, default=None),
                delta=delta,
                alpha=self.alpha,
                power=power,
            )
            text += "; " + verdict.sentence()
        cause = "" if self.equal else self.invalid_lead()  # a lead too small to pick still has a cause
        return text + (f"; {cause}" if cause else "")


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def decisions(runs: Runs, study: PairedStudy | None = None, *, alpha: float = 0.05) -> list[Decision]:
    """One `Decision` per benchmark and condition with two or more models and a headline every run logged."""
    found = []
    for benchmark, label, rows, _ in condition_groups(runs.table, axes=("model",)):
        metric, rows = ranked(latest(rows, ["model"]))  # the paired study's order too: leader − runner-up
        if metric is None or rows["model"].nunique() < 2:
            continue
        order = run_rows(rows)
        first, second = order[0]["run_id"], order[1]["run_id"]
        difference = study.lookup(first, second, metric) if study is not None else None
        found.append(Decision(benchmark, label, metric, order, difference, _holm(study, first, second, metric), alpha))
    return found


def bottom_lines(found: list[Decision], *, delta: float = 0.02, power: float = 0.8) -> list[str]:
    return [d.bottom_line(delta=delta, power=power) for d in found]


def _record(d: Decision) -> dict[str, Any]:
    lo = d.found.lo if d.found is not None and d.found.lo is not None else math.nan
    hi = d.found.hi if d.found is not None and d.found.hi is not None else math.nan
    return {
        "benchmark": d.benchmark,
        "condition": d.label,
        "metric": d.metric,
        "models": len(d.ranked),
        "leader": d.first["model"] if d.pick else None,
        "first": d.first["model"],
        "first_value": d.first[d.metric],
        "first_run": d.first["run_id"],
        "second": d.second["model"],
        "second_value": d.second[d.metric],
        "second_run": d.second["run_id"],
        "difference": d.found.difference if d.found is not None else math.nan,
        "lo": lo,
        "hi": hi,
        "p_holm": math.nan if d.p_holm is None else d.p_holm,
        "tie": d.tie,
        "none_above_chance": d.none_above,
        "vs_chance": d.chance_cell(),
    }


def _text_row(d: Decision) -> dict[str, str]:
    difference = "–"
    if d.equal:
        difference = signed(0.0) + " (equal)"
    elif d.found is not None:
        difference = difference_cell(d.found)
    return {
        "metric": d.metric,
        "first": f"{d.first['model']} {judged_cell(d.first, d.metric)}",
        "second": f"{d.second['model']} {judged_cell(d.second, d.metric)}",
        f"{minus('first', 'second')} [95%]": difference,
        "p (Holm)": p_text(d.p_holm),
        "verdict": d.verdict(),
        "vs chance": d.chance_cell(),
    }


def leader_table(
    runs: Runs, study: PairedStudy | None = None, *, alpha: float = 0.05, found: list[Decision] | None = None
) -> Built:
    """The summary table (module docstring); `study` is the report's `paired.PairedStudy` (None: `--no-paired`,
    the differences are left out and said so); `found`: the `decisions` already made."""
    out = Built()
    found = decisions(runs, study, alpha=alpha) if found is None else found
    if not found:
        return out
    text = pd.DataFrame([_text_row(d) for d in found], index=pd.Index([d.where for d in found], name="benchmark"))
    out.tables.append(
        Table(
            title="the first two models per benchmark",
            data=pd.DataFrame([_record(d) for d in found]),
            text=text,
            name="summary",
            caption=f"{HEADLINE_RULE}; per benchmark and condition the models ranked by it with its 95% interval; "
            "the paired difference first − second on the same questions and the same metric, with its paired "
            "bootstrap 95% interval and its p-value Holm-adjusted over the differences of that condition's table "
            f"(section Paired differences); a tie, naming no leader, where that p is not below {alpha:g}; no pick "
            "where every model is at or below chance on the headline; "
            "vs chance: every model of the condition (in rank order) against the chance level of its headline: "
            "above it, indistinguishable from it (its interval contains chance) or below it; " + AT_CHANCE_NOTE,
        )
    )
    if study is None:
        out.notes.append("summary: no paired differences (--no-paired): every lead is marked 'tie? (no paired test)'")
    return out
