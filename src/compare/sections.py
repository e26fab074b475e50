"""The report's sections: the decision first (bottom line, summary, paired differences, questions needed), then
the runs, one section per study the runs hold, the papers' spreads and the questions answered differently; and the
per-question disagreements of two runs (`--diff`).

A table or plot whose inputs are absent is replaced by one line saying why; nothing here raises for missing data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from src.core.records import NEAR_TIE_MARGIN
from src.metrics.chance import AT_CHANCE, AT_CHANCE_MEANING, INVALID_FLAG, chance_verdict, invalid_flag
from src.metrics.display import fmt
from src.metrics.slots import SLOT_BIAS_FLAG
from src.tracking.records import read_run_records

from . import plots
from .definitions import definitions_table
from .load import Runs, read_prompts, run_label
from .paired import DEFAULTS, PairedStudy, paired_study
from .plots import Plot
from .questions import disagreement_table, disagreements, model_disagreements, run_variant_disagreements
from .spreads import paper_spreads
from .summary import BOTTOM_TITLE, TITLE as SUMMARY_TITLE, bottom_lines, decisions, leader_table
from .sure_rule import trial_parts_of
from .tables import cora_tables, diff_records, fluctuation_tables, rank_changes, repetition_tables, revas_tables
from .tables.common import AT_CHANCE_NOTE, Built, Table, judged_cell, varying
from .tables.slots import TITLE as POSITION_TITLE, slot_table

RUNS_TITLE = "Runs"  # the section that holds the report-wide notes
# The runs table's columns: what tells the runs apart (the keys shown only where they vary, the others said once
# under the table, so that it fits a laptop screen), then what they measured
OVERVIEW_KEYS = ("variants", "temperature", "fewshot", "scoring", "repetitions")
OVERVIEW_COLUMNS = ("model", "benchmark", *OVERVIEW_KEYS, "n_questions", "invalid_rate", "chance")


@dataclass
class Section:
    title: str
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    paired_lines: list[str] = field(default_factory=list)  # printed by the CLI: one line per paired difference
    lines: list[str] = field(default_factory=list)  # sentences shown as a list under the intro (the bottom line)
    # the studies these runs do not hold, each with why (`present_studies`): one line in Markdown, a collapsed list
    # in HTML
    absent: list[tuple[str, list[str]]] = field(default_factory=list)

    def add(self, built: Built) -> Section:
        self.tables += built.tables
        self.notes += built.notes
        return self

    def add_plots(self, made: tuple[list[Plot], list[str]]) -> Section:
        self.plots += made[0]
        self.notes += made[1]
        return self


def overview(runs: Runs) -> Section:
    frame = runs.table
    fixed = [k for k in OVERVIEW_KEYS if k in frame.columns and k not in varying(frame, OVERVIEW_KEYS)]
    columns = [c for c in OVERVIEW_COLUMNS if c in frame.columns and c not in fixed]
    order = [c for c in ("model", "benchmark", "variants", "temperature") if c in frame.columns]
    data = frame.sort_values(order, kind="stable")[["run_id", *columns]]
    text = data.assign(run_id=data["run_id"].str[:8]).set_index("run_id").map(_cell)
    rows = frame.loc[data.index]
    verdicts = [chance_verdict(row) for _, row in rows.iterrows()]
    # each run's headline accuracy with its interval, and what it says against chance (src/metrics/chance.py)
    text.insert(
        min(
            len(text.columns),
            list(text.columns).index("n_questions") + 1 if "n_questions" in text.columns else len(text.columns),
        ),
        "accuracy judged [95%]",
        [f"{v.metric} {judged_cell(row, v.metric)}" if v else "–" for v, (_, row) in zip(verdicts, rows.iterrows())],
    )
    text["vs chance"] = [v.short() or "–" if v else "–" for v in verdicts]
    if SLOT_BIAS_FLAG in frame.columns:  # a letter habit (src/metrics/slots.py): said beside the verdict it weakens
        habit = [row.get(SLOT_BIAS_FLAG) == 1.0 for _, row in rows.iterrows()]  # src/metrics/slots.py FAR_MARGIN
        text["vs chance"] = [f"{c}; letter habit" if h else c for c, h in zip(text["vs chance"], habit)]
    if "invalid_rate" in text.columns:  # src/metrics/chance.py INVALID_FLAG: said beside the share
        flagged = [bool(invalid_flag(row)) for _, row in rows.iterrows()]
        text["invalid_rate"] = [f"{c} (high)" if f else c for c, f in zip(text["invalid_rate"], flagged)]
    at_chance = sum(bool(v and v.at_chance) for v in verdicts)
    intro = (
        f"{len(frame)} finished job runs; every table below is computed from their logged metrics "
        "(names as docs/metrics.md)."
    )
    if at_chance:
        intro += (
            f" {at_chance} of them {'is' if at_chance == 1 else 'are'} {AT_CHANCE} (†: the interval of "
            f"the accuracy contains chance): {AT_CHANCE_MEANING}."
        )
    section = Section(RUNS_TITLE, intro=intro)
    section.tables.append(
        Table(
            title="runs compared",
            data=frame,
            text=text,
            name="runs",
            caption="runs.csv holds every logged metric of every run; accuracy judged: acc mean in a run with "
            "repetitions, else MCQA, else accuracy, with its interval, against the chance column; "
            + AT_CHANCE_NOTE
            + f"; (high): an INVALID share above {INVALID_FLAG:.2f}, enough to move an accuracy by as much, since "
            "every accuracy counts INVALID wrong; letter habit: its most chosen answer slot is far above the right "
            f"answers' share in it ({POSITION_TITLE} below)",
        )
    )
    if fixed:
        section.notes.append(
            "every run has " + ", ".join(f"{k} {_cell(frame[k].iloc[0])}" for k in fixed) + " (not a column)"
        )
    section.notes += runs.skipped
    section.notes += metric_name_notes(frame, runs.metric_columns)
    section.notes += near_tie_notes(frame)
    return section


def near_tie_notes(frame: pd.DataFrame) -> list[str]:
    """One line: how many ranked decisions (logprob, cloze) of the runs were near-ties, the ones another CPU, dtype
    or batch size may flip (src/core/records.py NEAR_TIE_MARGIN), and in which runs; none for runs without margins.

    >>> near_tie_notes(pd.DataFrame({"run_id": ["ab12cd34ef", "9f8e7d6c5b"], "near_ties": [2.0, 0.0],
    ...                              "ranked_decisions": [46.0, 10.0]}))  # doctest: +NORMALIZE_WHITESPACE
    ['near-ties (decision margin below 0.001: another CPU, dtype or batch size may flip them): 2 of 56 ranked
      decisions of 2 runs; run ab12cd34: 2 of 46']
    """

    if "ranked_decisions" not in frame.columns:
        return []
    ranked = frame[frame["ranked_decisions"].fillna(0) > 0]
    if ranked.empty:
        return []
    runs = "; ".join(
        f"run {run_id[:8]}: {int(near)} of {int(decisions)}"
        for run_id, near, decisions in zip(ranked["run_id"], ranked["near_ties"], ranked["ranked_decisions"])
        if near > 0
    )
    return [
        f"near-ties (decision margin below {NEAR_TIE_MARGIN:g}: another CPU, dtype or batch size may flip them): "
        f"{int(ranked['near_ties'].sum())} of {int(ranked['ranked_decisions'].sum())} ranked decisions of "
        f"{len(ranked)} runs" + (f"; {runs}" if runs else "")
    ]


def _cell(value: Any) -> str:
    """Whole numbers without decimals (counts, shots, temperature 0), others as the tables show them."""
    if isinstance(value, float) and value == value and value.is_integer():
        return str(int(value))
    return fmt(value, 3) if isinstance(value, float) else fmt(value)


def metric_name_notes(frame: pd.DataFrame, metrics: list[str]) -> list[str]:
    """Per (variant set, benchmark): metric names logged by some runs and not others (MLflow's compare view
    lines runs up by name, so these would show as gaps). NaN values are never logged (e.g. RWS with nothing SURE)."""
    notes = []
    for (variants, benchmark), rows in frame.groupby(["variants", "benchmark"], sort=True):
        present = rows[metrics].notna()
        partial = [m for m in metrics if present[m].any() and not present[m].all()]
        if partial:
            notes.append(
                f"metric names, {variants} on {benchmark}: {', '.join(partial[:8])}"
                f"{' …' if len(partial) > 8 else ''} logged by {min(present[partial].sum())} of {len(rows)} runs "
                "(NaN values such as RWS with nothing SURE are not logged)"
            )
    return notes


def build_sections(
    runs: Runs,
    *,
    paired: bool = True,
    paired_options: dict[str, Any] | None = None,
    fluctuation_spreads: bool = False,
) -> list[Section]:
    """The report's sections, decision first: the bottom line per benchmark, the summary table it is read from, the
    paired differences and the questions-needed tables (`decision_sections`); then the runs (opening with the
    definitions of the accuracy-like numbers shown) and one section per study the runs hold (a study not run gets no
    section, only a note under the runs); then the detail: the spreads the papers report and the questions the
    models answer differently. With `paired` (the default), the runs' records are read for the paired study
    (`src.compare.paired`), the spreads (`spreads`) and the questions (`questions`); `paired_options` go to
    `paired.paired_study` (intersect, delta, alpha, power, n_resamples, seed); `fluctuation_spreads` adds the
    answer-fluctuation paper's stability study (200 metric computations per run that asked every order)."""
    options = paired_options or {}
    study = paired_study(runs, **options) if paired else None
    cora = cora_tables(runs.table)
    detail = detail_sections(runs, fluctuation_spreads) if study is not None else []
    decision = decision_sections(runs, study, options)
    first = [s for s in decision if s.tables or s.lines]
    absent = [s for s in decision[2:] if not s.tables]  # the paired tables: named under the runs, as absent studies
    parts = trial_parts_of(runs) if paired else None  # the SURE/UNSURE bars' parts, from the records
    studies = present_studies([overview(runs), *study_sections(runs.table, cora, study, parts), *detail, *absent])
    if study is not None:
        studies[0].paired_lines = study.lines
    shown = [table for section in first + studies for table in section.tables]
    studies[0].tables.insert(0, definitions_table(shown))  # before the runs' numbers
    return first + studies


def decision_sections(runs: Runs, study: PairedStudy | None, options: Mapping[str, Any]) -> list[Section]:
    """What decides: the bottom line per benchmark, the summary table, the paired differences and the
    questions-needed tables (the last two only with the paired study); empty sections where no condition has two
    models."""
    alpha, delta, power = (options.get(k, DEFAULTS[k]) for k in ("alpha", "delta", "power"))
    found = decisions(runs, study, alpha=alpha)
    summary = Section(
        SUMMARY_TITLE,
        intro="Which model is best on each benchmark and condition, and is its lead significant? (Each condition's "
        "headline metric: under the table.)",
    ).add(leader_table(runs, study, alpha=alpha, found=found))
    bottom = Section(BOTTOM_TITLE, lines=bottom_lines(found, delta=delta, power=power))  # none without a summary
    out = [bottom, summary]
    if study is not None:
        out += [
            Section(
                "Paired differences between models",
                intro="Per benchmark and condition, every pair of models on the same questions: the difference "
                "A − B of each headline metric (A ranked above B on the condition's headline: leader − "
                "runner-up, as in the bottom line), its paired cluster-bootstrap 95% interval (the same "
                "resample of questions for both runs), a two-sided bootstrap p-value and the p-value "
                "Holm-adjusted over every difference of the table.",
            ).add(study.differences),
            Section(
                "How many questions are enough",
                intro="Per metric, from the per-question variance of these runs: the number of questions needed "
                "to detect the difference Δ at the power and level each table names (normal "
                "approximation; `python -m src.plan` gives the same for any run).",
            ).add(study.power),
        ]
    return out


def study_sections(
    frame: pd.DataFrame,
    cora: Built,
    study: PairedStudy | None,
    parts: tuple[dict[str, dict[str, float]], list[str]] | None = None,
) -> list[Section]:
    """One section per seed paper's study (kept by `present_studies` only where the runs hold it); `parts`:
    `sure_rule.trial_parts_of`'s (trial parts by run id, notes), None when the records are not read."""
    bar_parts, bar_notes = parts if parts is not None else ({}, [])
    return [
        Section(
            "CoRA ranking",
            intro="CoRA paper, Table 1: per benchmark, models as columns; MCQA on the original "
            "order, MCQA+ and MV over the divergent set, CoRA = MCQA x CI.",
        )
        .add(cora)
        .add_plots(plots.bmca_curves(frame)),
        Section("Rank changes between MCQA and CoRA").add(rank_changes(cora, study)),
        Section(
            "Repetition trials",
            intro="Repetition paper, Table 1 and Figures 1-4: SURE/UNSURE under the rule "
            "each table names (answer: the modal answer reaches p* of R repetitions, "
            "section 3.2; correctness: all R trials right or all wrong, the paper's "
            "tables); RWS = right when SURE, S/T = share SURE.",
        )
        .add(repetition_tables(frame))
        .add_plots(plots.consistency_plots(frame))
        .add_plots(plots.sure_bars(frame, bar_parts))
        .add(Built(notes=bar_notes)),
        Section(
            POSITION_TITLE,
            intro="Per run, the answer slot (A, B, ...) the model chose most among its valid answers against the "
            "share of right answers in that slot (docs/metrics.md, Position bias): a model far above answers by "
            "letter, and its agreement across repetitions and orders is the habit's.",
        ).add(slot_table(frame)),
        Section(
            "Answer fluctuation: R² of metrics on permutation subsets",
            intro="Answer-fluctuation paper, Table 1: how well each metric on a cheap permutation set predicts the "
            "full fluctuation rate and the original accuracy across (model, benchmark) points.",
        ).add(fluctuation_tables(frame)),
        Section(
            "REVAS: accuracy, consistency and hard accuracy by number of options",
            intro="REVAS paper, Figure 3 and Tables 3-4.",
        )
        .add(revas_tables(frame))
        .add_plots(plots.options_plots(frame)),
    ]


def detail_sections(runs: Runs, fluctuation_spreads: bool) -> list[Section]:
    """The detail after the studies: the papers' own spreads, and the questions answered differently."""
    return [
        Section(
            "Spreads the papers report, beside the intervals",
            intro="Each seed paper's own uncertainty statement, computed its way, beside the 95% interval "
            "this tool logs: the papers' spreads move the variants, repetitions or permutations drawn; "
            "the intervals move the questions sampled.",
        ).add(paper_spreads(runs, fluctuation=fluctuation_spreads)),
        Section(
            "Questions the models answer differently",
            intro="Per benchmark and condition, every question on which the models' answers to the "
            "reference order differ: the prompt as shown (question and labelled options), each "
            "model's output, the label parsed from it and whether it is right.",
        ).add(model_disagreements(runs)),
        Section(
            "Questions a model answers differently across variants",
            intro="Per run of a set with several orders or option lists per question: every question whose "
            "variants got answers that pick different options (repetition 0), each variant with its "
            "prompt as shown, output and parse; the page shows the first questions, "
            "tables/variant_disagreements_*.parquet every one.",
        ).add(run_variant_disagreements(runs)),
    ]


def present_studies(sections: list[Section]) -> list[Section]:
    """The runs section, then only the sections with a table or a plot; the others are one line under the runs
    naming the studies not in these runs (`absent_line`), with why each is absent in `Section.absent` (a collapsed
    list in the HTML page)."""
    runs, rest = sections[0], sections[1:]
    kept = [s for s in rest if s.tables or s.plots]
    runs.absent = [(s.title, s.notes) for s in rest if not (s.tables or s.plots)]
    if runs.absent:
        runs.notes.append(absent_line(runs))
    return [runs, *kept]


def absent_line(section: Section) -> str:
    return "not in these runs (no section): " + "; ".join(title for title, _ in section.absent)


def diff_section(tracking_uri: str, run_a: str, run_b: str) -> Section:
    """Per-question disagreements between two runs, from their records."""
    label_a, label_b = run_label(tracking_uri, run_a), run_label(tracking_uri, run_b)
    records_a = read_run_records(run_a, tracking_uri, key="--diff")
    records_b = read_run_records(run_b, tracking_uri, key="--diff")
    summary, per_question, trials = diff_records(records_a, records_b)
    section = Section(
        f"Disagreements: {run_a[:8]} vs {run_b[:8]}",
        intro=f"A = {run_a} ({label_a}); B = {run_b} ({label_b}). Trials matched on question, variant "
        "and repetition; answers compared by option identity (INVALID is its own answer).",
    )
    if not summary.get("shared_trials"):
        section.notes.append("the two runs share no (question, variant, repetition): nothing to compare")
        return section
    data = pd.DataFrame([summary])
    section.tables.append(
        Table(
            title="summary",
            data=data,
            name="diff_summary",
            caption="shares of the shared trials (agreement between two runs: no chance level of "
            "its own; each run's chance is in the runs table)",
            text=pd.DataFrame(
                {k: [fmt(v) if k.endswith(("rate", "right", "wrong")) else f"{v:.0f}"] for k, v in summary.items()}
            )
            .rename_axis("")
            .set_axis(["A vs B"]),
        )
    )
    if per_question.empty:
        section.notes.append("the runs agree on every shared trial")
        return section
    section.tables.append(
        Table(
            title="questions with a disagreement",
            data=per_question,
            name="diff_questions",
            text=per_question.set_index("question_id").map(fmt),
            caption="trials = shared trials of the question; a_right/b_right = trials right "
            "(counts: no chance level applies)",
        )
    )
    shown = trials.head(200)
    section.tables.append(
        Table(
            title="disagreeing trials",
            data=trials,
            name="diff_trials",
            text=shown.set_index("question_id").map(fmt),
            caption=f"{len(trials)} trials"
            + (" (first 200 shown; all in the CSV)" if len(trials) > 200 else "")
            + "; labels as shown, INVALID when none was parsed (one trial: no chance "
            "level; the question's is in the table below)",
        )
    )
    detail = disagreements(
        {f"A {run_a[:8]}": records_a, f"B {run_b[:8]}": records_b},
        {f"A {run_a[:8]}": read_prompts(run_a, tracking_uri), f"B {run_b[:8]}": read_prompts(run_b, tracking_uri)},
        run_ids={f"A {run_a[:8]}": run_a, f"B {run_b[:8]}": run_b},
    )
    if not detail.empty:
        section.tables.append(
            disagreement_table(
                detail,
                title="questions answered differently, as shown",
                name="diff_questions_shown",
                caption="Reference order, repetition 0.",
            )
        )
    return section
