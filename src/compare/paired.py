"""Paired differences between the models of each condition, and how many questions a comparison needs.

For every benchmark and condition (the same grouping as the CoRA table: runs that differ only in the model), every
pair of models is compared on the questions both asked: the difference of each headline metric with its paired
bootstrap interval and p-value (`src.metrics.paired`), the p-values Holm-adjusted across the pairs and metrics of
the table. Pairs must have asked the same questions: otherwise the report stops with one `error:` line naming both
runs, unless `--pair-intersection` pairs them on the questions they share. The power table gives, per metric,
the questions needed to detect a difference `delta` (each run alone and each pair, paired).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import pandas as pd

from src.common.errors import UserError
from src.metrics.display import MCQA_ONE_DRAW, difference_cell, fmt, mcqa_one_draw, minus, undefined_reason
from src.tracking import store as tracking_store

from ..metrics.intervals import MIN_BOOTSTRAP_QUESTIONS, Decomposition, decompose
from ..metrics.paired import (
    PairedDifference,
    QuestionsVerdict,
    holm,
    paired_differences,
    per_question_sd,
    question_mismatch,
)
from .load import Runs, benchmark_size
from .tables.common import (
    ONE_VARIANT_SETS,
    Built,
    RunRow,
    Table,
    chance_of,
    condition_groups,
    latest,
    p_text,
    ranked,
    run_rows,
    slug,
    spread_text,
)
from .tables.cora import CORA_FAMILY_PREFIXES

ONE_VARIANT_CORA = "a one-variant set's CoRA family equals MCQA (CI = 1 by definition)"
LeftOut = tuple[str, str, str]  # (metric, the run or pair, why): a metric a table has no row for
DEFAULTS = {"delta": 0.02, "alpha": 0.05, "power": 0.8, "n_resamples": 1000, "seed": 0}


@dataclass
class PairedStudy:
    """What the paired comparison made: the differences tables, the power tables, every pair's results keyed by
    (run_a, run_b) with differences a - b, and one printable line per difference."""

    differences: Built = field(default_factory=Built)
    power: Built = field(default_factory=Built)
    results: dict[tuple[str, str], dict[str, PairedDifference]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def extend(self, other: PairedStudy) -> None:
        """Add `other`'s tables, notes, results and lines after this study's (one condition's, in order)."""
        for mine, theirs in ((self.differences, other.differences), (self.power, other.power)):
            mine.tables += theirs.tables
            mine.notes += theirs.notes
        self.results.update(other.results)
        self.lines += other.lines

    def lookup(self, run_a: str, run_b: str, metric: str) -> PairedDifference | None:
        """The difference a - b of `metric` (the stored b - a with its sign flipped, when stored that way)."""
        if (run_a, run_b) in self.results:
            return self.results[(run_a, run_b)].get(metric)
        found = self.results.get((run_b, run_a), {}).get(metric)
        if found is None:
            return None

        def flip(v: float | None) -> float | None:
            return None if v is None else -v

        return PairedDifference(
            metric,
            found.b,
            found.a,
            -found.difference,
            flip(found.hi),
            flip(found.lo),
            found.p,
            found.n_questions,
            found.sd,
        )


class _Records:
    """Each run's decomposition, made once (records read once per report by `Runs.records`, then
    `intervals.decompose`)."""

    def __init__(self, runs: Runs):
        self.runs = runs
        self.cache: dict[tuple[str, frozenset[str] | None], Decomposition] = {}

    def records(self, run_id: str) -> pd.DataFrame:
        return self.runs.records(run_id, key="--no-paired")

    def decomposition(self, row: RunRow, keep: frozenset[str] | None = None) -> Decomposition:
        key = (row["run_id"], keep)
        if key not in self.cache:
            records = self.records(row["run_id"])
            if keep is not None:
                records = records[records["question_id"].astype(str).isin(keep)]
            options = {"sure_rule": row["sure_rule"]} if isinstance(row.get("sure_rule"), str) else {}
            self.cache[key] = decompose(records, by_subjects=False, **options)
        return self.cache[key]


def _label(row: RunRow) -> str:
    """`run 33888750 (smollm2_135m)`: the word says what the 8 digits are (alone they read as a number)."""
    return f"run {row['run_id'][:8]} ({row['model']})"


@dataclass(frozen=True)
class _Options:
    """What every condition of one study is computed with (`paired_study`'s keywords)."""

    intersect: bool
    delta: float
    alpha: float
    power: float
    n_resamples: int
    seed: int


def paired_study(
    runs: Runs,
    *,
    intersect: bool = False,
    delta: float = DEFAULTS["delta"],
    alpha: float = DEFAULTS["alpha"],
    power: float = DEFAULTS["power"],
    n_resamples: int = int(DEFAULTS["n_resamples"]),
    seed: int = int(DEFAULTS["seed"]),
) -> PairedStudy:
    """Paired differences and power tables for every condition of `runs` (see the module docstring)."""
    study = PairedStudy()
    frame = runs.table
    db = tracking_store.sqlite_path(runs.tracking_uri)
    if db is not None and not db.is_file():
        study.differences.notes.append(f"paired differences: no MLflow store at {db} to read the runs' records from")
        return study
    store = _Records(runs)
    options = _Options(intersect, delta, alpha, power, n_resamples, seed)
    for benchmark, label, rows, _ in condition_groups(frame, axes=("model",)):
        _, rows = ranked(latest(rows, ["model"]))  # leader first: every pair's difference is higher − lower
        title = benchmark + (f" ({label})" if label else "")
        study.extend(_condition(store, run_rows(rows), title, slug(benchmark, label), options))
    if not study.differences.tables:
        study.differences.notes.append(
            "paired differences: no benchmark and condition with runs of two or more "
            "models (pairs are made within a condition: same variants, temperature, "
            "shots, scoring, prompt, repetitions, limit and seed)"
        )
    return study


def _condition(store: _Records, rows: list[RunRow], title: str, name: str, options: _Options) -> PairedStudy:
    """The paired differences and the questions-needed table of one benchmark and condition."""
    part = PairedStudy()
    pairs = list(combinations(rows, 2))
    records: list[dict[str, Any]] = []
    power_rows: list[dict[str, Any]] = []
    left_out: list[LeftOut] = []
    power_left_out: list[LeftOut] = []
    for a, b in pairs:
        pair = _pair(store, a, b, title, options)
        part.differences.notes += pair.notes
        if pair.results is not None:
            part.results[(a["run_id"], b["run_id"])] = pair.results
        records += pair.rows
        power_rows += pair.power_rows
        left_out += pair.left_out
        power_left_out += pair.power_left_out
    alone, skipped, alone_left_out = _alone_rows(store, rows, title, options)
    power_rows += alone
    part.power.notes += skipped
    if records:
        table, lines = _differences_table(pd.DataFrame(records), title, name, len(pairs), options)
        table.caption += left_out_note(left_out)
        part.differences.tables.append(table)
        part.lines += lines
    if power_rows:
        table = _power_table(pd.DataFrame(power_rows), title, name, options)
        table.caption += left_out_note([*power_left_out, *alone_left_out])
        part.power.tables.append(table)
    return part


def left_out_note(reasons: list[LeftOut]) -> str:
    """The metrics a table has no row for, each with why, those of one run or pair and one reason together:
    `; left out (no row): rws (a − b): undefined in ...`; '' when none is."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for metric, who, why in reasons:
        grouped.setdefault((who, why), []).append(metric)
    together: dict[tuple[tuple[str, ...], str], list[str]] = {}  # the same metrics for the same reason: one part
    for (who, why), metrics in grouped.items():
        together.setdefault((tuple(metrics), why), []).append(who)
    parts = [f"{', '.join(metrics)} ({'; '.join(whos)}): {why}" for (metrics, why), whos in together.items()]
    return "; left out (no row): " + "; ".join(parts) if parts else ""


def _shared_questions(
    store: _Records, a: RunRow, b: RunRow, title: str, intersect: bool
) -> tuple[bool, frozenset[str] | None, list[str]]:
    """(paired, keep, notes): whether the two runs can be paired, on which questions (None: all; the runs asked the
    same), and the note that says how or why not. UserError when they asked different questions and `intersect` is
    off."""
    try:
        ids_a = store.records(a["run_id"])["question_id"].dropna().astype(str).unique()
        ids_b = store.records(b["run_id"])["question_id"].dropna().astype(str).unique()
    except UserError as err:
        return False, None, [f"paired differences, {title}: {_label(a)} and {_label(b)} not paired ({err})"]
    mismatch = question_mismatch(ids_a, ids_b)
    if not mismatch:
        return True, None, []
    if not intersect:
        raise UserError(
            f"paired differences: runs {a['run_id']} ({a['model']}) and {b['run_id']} ({b['model']}) of "
            f"{title} asked different questions ({mismatch}); paired differences need the same "
            f"questions: give --pair-intersection to pair them on the shared ones, or --no-paired"
        )
    keep = frozenset(ids_a) & frozenset(ids_b)
    if not keep:
        return False, None, [f"paired differences, {title}: {_label(a)} and {_label(b)} share no question: not paired"]
    note = (
        f"paired differences, {title}: {_label(a)} and {_label(b)} paired on "
        f"their {len(keep)} shared questions ({mismatch}; --pair-intersection)"
    )
    return True, keep, [note]


@dataclass
class _Pair:
    """What one pair of models gives: its differences by metric (None: not paired), a row per difference, its
    paired questions-needed rows, and the notes on how it was paired or why not."""

    results: dict[str, PairedDifference] | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    power_rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)  # each metric not in the differences table, with why
    power_left_out: list[LeftOut] = field(default_factory=list)  # the same for its questions-needed rows


def _pair(store: _Records, a: RunRow, b: RunRow, title: str, options: _Options) -> _Pair:
    """One pair of models: its differences a - b and its paired questions-needed rows."""
    paired, keep, notes = _shared_questions(store, a, b, title, options.intersect)
    out = _Pair(notes=notes)
    if not paired:
        return out
    dec_a, dec_b = store.decomposition(a, keep), store.decomposition(b, keep)
    left_out: set[str] = set()
    if a.get("sure_rule") != b.get("sure_rule"):
        left_out = {"rws", "st"}
        out.notes.append(
            f"paired differences, {title}: {_label(a)} and {_label(b)} use different "
            "SURE rules: RWS and S/T not compared (--sure-rule recomputes both)"
        )
    if a.get("variants") in ONE_VARIANT_SETS or b.get("variants") in ONE_VARIANT_SETS:
        left_out |= {n for n in dec_a.names if n.startswith(CORA_FAMILY_PREFIXES)}  # CI = 1 by definition
    if mcqa_one_draw(dec_a.names) or mcqa_one_draw(dec_b.names):
        left_out |= {"mcqa"}
    names = [n for n in dec_a.names if "/" not in n and n in set(dec_b.names) and n not in left_out]
    out.results = paired_differences(dec_a, dec_b, names, n_resamples=options.n_resamples, seed=options.seed)
    who = minus(a["model"], b["model"])
    for metric in dict.fromkeys(n for n in [*dec_a.names, *dec_b.names] if "/" not in n):
        if metric not in out.results:
            out.left_out.append((metric, who, _why_left_out(metric, a, b, dec_a, dec_b, left_out)))
    for metric, r in out.results.items():
        out.rows.append(
            {
                "model_a": a["model"],
                "model_b": b["model"],
                "run_a": a["run_id"],
                "run_b": b["run_id"],
                "metric": metric,
                "a": r.a,
                "b": r.b,
                "difference": r.difference,
                "lo": r.lo,
                "hi": r.hi,
                "p": r.p,
                "n_questions": r.n_questions,
                "chance": spread_text([chance_of(a, metric), chance_of(b, metric)]),
            }
        )
        if r.sd is not None:
            size = min((s for s in (benchmark_size(a), benchmark_size(b)) if s is not None), default=None)
            out.power_rows.append(_power_row(f"{who} (paired)", metric, len(dec_a.question_ids), r.sd, size, options))
        else:
            why = _why_untested(metric, r.n_questions, options.n_resamples)
            out.power_left_out.append((metric, f"{who}, paired", why))
    out.power_left_out += [(metric, f"{who}, paired", why) for metric, _, why in out.left_out]
    return out


def _why_left_out(
    metric: str, a: RunRow, b: RunRow, dec_a: Decomposition, dec_b: Decomposition, skipped: set[str]
) -> str:
    """Why a pair's differences table has no row for `metric`, one of the two runs' metrics."""
    if metric in skipped and metric in ("rws", "st") and a.get("sure_rule") != b.get("sure_rule"):
        return "the runs use different SURE rules (--sure-rule recomputes both)"
    if metric == "mcqa" and metric in skipped:
        return MCQA_ONE_DRAW
    if metric in skipped:
        return ONE_VARIANT_CORA
    for row, dec in ((a, dec_a), (b, dec_b)):
        if metric not in dec.names:
            return f"not measured by {_label(row)}"
    for row, dec in ((a, dec_a), (b, dec_b)):
        if dec.parts(metric).n_questions == 0 or _undefined(row.get(metric)):
            return f"{_label(row)} {undefined_reason(metric)}"
    return "undefined in one run on these questions"


def _undefined(value: Any) -> bool:
    return value is None or value != value


def _why_untested(metric: str, n_questions: int, n_resamples: int, *, pair: bool = True) -> str:
    """Why a metric of a pair (or, not `pair`, of a run alone) has no interval, no p and no per-question sd."""
    if n_resamples <= 0:
        return "no resamples (--bootstrap 0)"
    if n_questions < MIN_BOOTSTRAP_QUESTIONS:
        where, needs = (" in one run", "an interval") if pair else ("", "an estimate")
        return (
            f"{n_questions} question{'' if n_questions == 1 else 's'} behind it{where} ({needs} needs "
            f"{MIN_BOOTSTRAP_QUESTIONS}{'; rws counts only SURE questions' if metric == 'rws' else ''})"
        )
    return "over 1% of the resamples leave it undefined (no question behind it in the resample)"


def _test(options: _Options) -> tuple[float, float, float]:
    return options.delta, options.alpha, options.power


def _alone_rows(
    store: _Records, rows: list[RunRow], title: str, options: _Options
) -> tuple[list[dict[str, Any]], list[str], list[LeftOut]]:
    """(rows, notes, left out): the questions-needed rows of each run alone, a note per run whose records are
    missing, and each metric of a run left without a row, with why."""
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    left_out: list[LeftOut] = []
    for row in rows:
        try:
            decomposition = store.decomposition(row)
        except UserError as err:
            notes.append(f"questions needed, {title}: {_label(row)} skipped ({err})")
            continue
        sds = per_question_sd(decomposition, n_resamples=options.n_resamples, seed=options.seed)
        n = len(decomposition.question_ids)
        for metric in (m for m in decomposition.names if "/" not in m):
            if row.get("variants") in ONE_VARIANT_SETS and metric.startswith(CORA_FAMILY_PREFIXES):
                left_out.append((metric, str(row["model"]), ONE_VARIANT_CORA))
                continue
            if metric == "mcqa" and mcqa_one_draw(decomposition.names):
                left_out.append((metric, str(row["model"]), MCQA_ONE_DRAW))
                continue
            if metric in sds:
                out.append(_power_row(row["model"], metric, n, sds[metric], benchmark_size(row), options))
                continue
            behind = decomposition.parts(metric).n_questions
            why = (
                undefined_reason(metric)
                if behind == 0 or _undefined(row.get(metric))
                else _why_untested(metric, behind, options.n_resamples, pair=False)
            )
            left_out.append((metric, str(row["model"]), why))
    return out, notes, left_out


def _differences_table(
    data: pd.DataFrame, title: str, name: str, pairs: int, options: _Options
) -> tuple[Table, list[str]]:
    """The differences table of one condition, Holm-adjusted over its rows, and one printed line per row."""
    alpha, n_resamples = options.alpha, options.n_resamples
    data["p_holm"] = holm([None if p is None or p != p else p for p in data["p"]])
    data["significant"] = [p is not None and p == p and p < alpha for p in data["p_holm"]]
    data.insert(0, "table", title)
    tested = int(sum(p is not None and p == p for p in data["p"]))
    text = pd.DataFrame(
        {
            "metric": data["metric"].to_numpy(),
            "A": [fmt(v) for v in data["a"]],
            "B": [fmt(v) for v in data["b"]],
            f"{minus('A', 'B')} [95%]": [difference_cell(r) for r in _results(data)],
            "p": [p_text(p) for p in _nones(data["p"])],
            "p (Holm)": [p_text(p) for p in _nones(data["p_holm"])],
            "significant": ["*" if s else "" for s in data["significant"]],
            "chance": data["chance"].to_numpy(),
        },
        index=pd.Index([minus(a, b) for a, b in zip(data["model_a"], data["model_b"])], name=minus("A", "B")),
    )
    table = Table(
        title=title,
        data=data,
        text=text,
        name=f"paired_{name}",
        caption=f"{pairs} pair{'s' if pairs != 1 else ''} of models on the same questions; "
        f"difference with its paired cluster-bootstrap 95% interval ({n_resamples} resamples of the "
        f"questions, the same draw for both runs), two-sided bootstrap p, Holm-adjusted over the {tested} "
        f"difference{'s' if tested != 1 else ''} of this table with a p; * = p (Holm) < {alpha:g}; chance: the "
        "accuracy of a uniform guesser (src/metrics/chance.py) where the metric is an accuracy, – where it is "
        "none" + untested_note(data, n_resamples),
    )
    lines = [
        f"{title}: {minus(r['model_a'], r['model_b'])} {r['metric']} "
        f"{difference_cell(_results(r.to_frame().T)[0])} p={p_text(_none(r['p']))} "
        f"p_holm={p_text(_none(r['p_holm']))}{' *' if r['significant'] else ''}"
        for _, r in data.iterrows()
    ]
    return table, lines


def untested_note(data: pd.DataFrame, n_resamples: int) -> str:
    """Why a difference has no interval and no p (its `–` cells), row by row: `; – in rws (A − B): ...`; ''
    when every row has its p."""
    reasons = []
    for _, r in data.iterrows():
        if r["p"] is not None and r["p"] == r["p"]:
            continue
        why = _why_untested(str(r["metric"]), int(r["n_questions"]), n_resamples)
        reasons.append(f"{r['metric']} ({minus(r['model_a'], r['model_b'])}): {why}")
    if not reasons:
        return ""
    return "; – in an interval, p or p (Holm): no interval and no p, so not among the differences Holm adjusts: " + (
        "; ".join(reasons)
    )


def _power_table(data: pd.DataFrame, title: str, name: str, options: _Options) -> Table:
    """The questions-needed table of one condition."""
    delta, alpha, power = _test(options)
    data.insert(0, "table", title)
    text = pd.DataFrame(
        {
            "metric": data["metric"].to_numpy(),
            "n": data["n"].astype(int).to_numpy(),
            "sd": data["sd"].map(fmt).to_numpy(),
            f"n needed (Δ={delta:g})": [_needed(v) for v in data["n_needed"]],
            "enough": data["verdict"].to_numpy(),
        },
        index=pd.Index(data["who"].to_numpy(), name="run or pair"),
    )
    return Table(
        title=title,
        data=data,
        text=text,
        name=f"power_{name}",
        caption=f"questions needed to detect a difference of {delta:g} at alpha {alpha:g} (two-sided) with "
        f"power {power:g}: n = ((z_(1-alpha/2) + z_power) sd / delta)^2, sd = per-question standard "
        "deviation (sqrt(n) x bootstrap standard error); capped by the benchmark's size N: where more "
        "questions are needed than it holds, `enough` gives the difference all of them detect, "
        "(z_(1-alpha/2) + z_power) sd / sqrt(N); a model alone: a shift of its own metric, a "
        "pair: the paired difference on the same questions (counts of questions: no chance level "
        "applies)",
    )


def _power_row(who: str, metric: str, n: int, sd: float, size: int | None, options: _Options) -> dict[str, Any]:
    """One row of a questions-needed table, by the one rule of `QuestionsVerdict` (capped by the benchmark's
    `size`); n_needed None (and enough None) when the metric did not vary over the resamples (sd 0: every
    question alike, e.g. BMCA(1.0) = 0), where no variance can be estimated."""
    delta, alpha, power = _test(options)
    verdict = QuestionsVerdict.of(n, sd, size, delta=delta, alpha=alpha, power=power)
    return {
        "who": who,
        "metric": metric,
        "n": n,
        "sd": sd,
        "delta": delta,
        "alpha": alpha,
        "power": power,
        "n_needed": verdict.needed,
        "enough": None if verdict.needed is None else n >= verdict.needed,
        "benchmark_size": size,
        "detectable_with_all": verdict.detectable,
        "verdict": verdict.enough_cell(),
    }


def _needed(value: Any) -> str:
    return "–" if value is None or value != value else str(int(value))


def _none(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def _nones(values: Iterable[Any]) -> list[float | None]:
    return [_none(v) for v in values]


def _results(data: pd.DataFrame) -> list[PairedDifference]:
    return [
        PairedDifference(
            r["metric"],
            r["a"],
            r["b"],
            r["difference"],
            _none(r["lo"]),
            _none(r["hi"]),
            _none(r["p"]),
            int(r["n_questions"]),
            None,
        )
        for _, r in data.iterrows()
    ]
