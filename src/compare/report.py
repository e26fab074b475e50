"""Assemble the comparison: sections of tables and plots, written as Markdown + CSV + one self-contained HTML
file (plots embedded as base64 data URIs), and logged as the artifacts of an MLflow run tagged `kind=comparison`.

A table or plot whose inputs are absent is replaced by one line saying why; nothing here raises for missing data.
"""

from __future__ import annotations

import base64
import html
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from src.common.errors import UserError
from src.common.safe_names import folder_name
from src.core.records import NEAR_TIE_MARGIN
from src.metrics.chance import AT_CHANCE, AT_CHANCE_MEANING, INVALID_FLAG, chance_verdict, invalid_flag
from src.tracking.records import read_run_records

from . import plots, tables
from .load import Runs, read_prompts, run_label
from .paired import DEFAULTS, paired_study
from .plots import Plot
from .questions import disagreement_table, disagreements, model_disagreements, run_variant_disagreements
from .spreads import paper_spreads
from .summary import BOTTOM_TITLE, TITLE as SUMMARY_TITLE, bottom_lines, decisions, leader_table
from .sure_rule import trial_parts_of
from .tables import Built, Table, fmt

COMPARISON_TAG = ("kind", "comparison")
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
    fixed = [k for k in OVERVIEW_KEYS if k in frame.columns and k not in tables.varying(frame, OVERVIEW_KEYS)]
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
        [
            f"{v.metric} {tables.judged_cell(row, v.metric)}" if v else "–"
            for v, (_, row) in zip(verdicts, rows.iterrows())
        ],
    )
    text["vs chance"] = [v.short() or "–" if v else "–" for v in verdicts]
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
            + tables.AT_CHANCE_NOTE
            + f"; (high): an INVALID share above {INVALID_FLAG:.2f}, enough to move an accuracy by as much, since "
            "every accuracy counts INVALID wrong",
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


def _cell(value) -> str:
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
    runs: Runs, *, paired: bool = True, paired_options: dict | None = None, fluctuation_spreads: bool = False
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
    cora = tables.cora_tables(runs.table)
    detail = detail_sections(runs, fluctuation_spreads) if study is not None else []
    decision = decision_sections(runs, study, options)
    first = [s for s in decision if s.tables or s.lines]
    absent = [s for s in decision[2:] if not s.tables]  # the paired tables: named under the runs, as absent studies
    parts = trial_parts_of(runs) if paired else None  # the SURE/UNSURE bars' parts, from the records
    studies = present_studies([overview(runs), *study_sections(runs.table, cora, study, parts), *detail, *absent])
    if study is not None:
        studies[0].paired_lines = study.lines
    studies[0].tables.insert(0, definitions_table(first + studies))  # before the runs' numbers
    return first + studies


def decision_sections(runs: Runs, study, options: dict) -> list[Section]:
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
                "A − B of each headline metric, its paired cluster-bootstrap 95% interval (the same "
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


def study_sections(frame: pd.DataFrame, cora: Built, study, parts=None) -> list[Section]:
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
        Section("Rank changes between MCQA and CoRA").add(tables.rank_changes(cora, study)),
        Section(
            "Repetition trials",
            intro="Repetition paper, Table 1 and Figures 1-4: SURE/UNSURE under the rule "
            "each table names (answer: the modal answer reaches p* of R repetitions, "
            "section 3.2; correctness: all R trials right or all wrong, the paper's "
            "tables); RWS = right when SURE, S/T = share SURE.",
        )
        .add(tables.repetition_tables(frame))
        .add_plots(plots.consistency_plots(frame))
        .add_plots(plots.sure_bars(frame, bar_parts))
        .add(Built(notes=bar_notes)),
        Section(
            "Answer fluctuation: R² of metrics on permutation subsets",
            intro="Answer-fluctuation paper, Table 1: how well each metric on a cheap permutation set predicts the "
            "full fluctuation rate and the original accuracy across (model, benchmark) points.",
        ).add(tables.fluctuation_tables(frame)),
        Section(
            "REVAS: accuracy, consistency and hard accuracy by number of options",
            intro="REVAS paper, Figure 3 and Tables 3-4.",
        )
        .add(tables.revas_tables(frame))
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
            "tables/variant_disagreements_*.csv every one.",
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


def absent_html(section: Section) -> str:
    """The studies not in these runs as a collapsed list: the one line, opening on why each is absent."""
    items = "".join(
        f"<li><b>{html.escape(title)}</b>: {html.escape(' '.join(notes) or 'nothing to show')}</li>"
        for title, notes in section.absent
    )
    return f"<details class=note><summary>Note: {html.escape(absent_line(section))}</summary><ul>{items}</ul></details>"


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


def _shown_labels(sections: list[Section]) -> set[str]:
    """Every column header, row label, `model · measure` measure and `metric` cell of the sections' tables, each
    also without its qualifier (`acc mean [95%]` -> `acc mean`, `chance (MCQA)` -> `chance`)."""
    import re

    found: set[str] = set()
    for section in sections:
        for table in section.tables:
            found.update(str(c) for c in table.text.columns)
            found.update(str(v).split(" · ")[-1] for v in table.text.index)
            if "metric" in table.text.columns:
                found.update(str(v) for v in table.text["metric"])
    labels = found | {re.split(r" [\[(]|@", label)[0] for label in found}
    if any(label.startswith(("BMCA(", "bmca_")) for label in labels):
        labels.add("BMCA(c)")
    return labels


def definitions_table(sections: list[Section]) -> Table:
    """One line per accuracy-like number the report shows."""
    shown = _shown_labels(sections)
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


def diff_section(tracking_uri: str, run_a: str, run_b: str) -> Section:
    """Per-question disagreements between two runs, from their records."""
    label_a, label_b = run_label(tracking_uri, run_a), run_label(tracking_uri, run_b)
    records_a = read_run_records(run_a, tracking_uri, key="--diff")
    records_b = read_run_records(run_b, tracking_uri, key="--diff")
    summary, per_question, trials = tables.diff_records(records_a, records_b)
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


# ---------------------------------------------------------------- rendering


def markdown_table(text: pd.DataFrame) -> str:
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    headers = [text.index.name or ""] + [str(c) for c in text.columns]
    lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    for label, row in text.iterrows():
        lines.append("| " + " | ".join(cell(v) for v in [label, *row.tolist()]) + " |")
    return "\n".join(lines)


def html_table(text: pd.DataFrame, *, prose: bool = False) -> str:
    """A table of numbers (right-aligned, labels left), or with `prose` one of words, left-aligned throughout."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [text.index.name or "", *text.columns])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in [label, *row.tolist()]) + "</tr>"
        for label, row in text.iterrows()
    )
    return f"<table{' class=prose' if prose else ''}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# 1,300 px: the summary table of 4 conditions x 2 models fits a 1,400 x 900 window below the bottom line (its rows
# on one or two lines each; the browser tier checks it)
CSS = """body{font-family:system-ui,sans-serif;max-width:1300px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}th,td{border:1px solid #ccc;padding:3px 8px;
text-align:right;white-space:pre-line}th:first-child,td:first-child{text-align:left}thead{background:#f3f3f3}
img{max-width:100%}
.prose td,.prose th{text-align:left;max-width:60em}.note{color:#8a5300}summary{cursor:pointer}
.caption{color:#555;font-size:.85em}figure{margin:1em 0}h3{margin-bottom:.2em}h1{margin:.4em 0}h2{margin:.8em 0 .4em}
table{display:block;overflow-x:auto;max-width:100%}.bottom li{font-weight:600;margin:.3em 0}"""


CONTENTS_TITLE = "Contents"
ABOUT_TITLE = "About this report"  # generated when, from which store, runs and filters: at the end


def anchor(title: str) -> str:
    """The id of a section's heading, as GitHub makes it from the Markdown heading (the contents link to it).

    >>> anchor("REVAS: accuracy, consistency and hard accuracy by number of options")
    'revas-accuracy-consistency-and-hard-accuracy-by-number-of-options'
    >>> anchor("Answer fluctuation: R² of metrics on permutation subsets")
    'answer-fluctuation-r²-of-metrics-on-permutation-subsets'
    """
    import re

    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _contents(sections: list[Section], md: list[str], body: list[str]) -> None:
    """The table of contents: a link to every section."""
    md += [f"## {CONTENTS_TITLE}", "", *[f"- [{s.title}](#{anchor(s.title)})" for s in sections], ""]
    links = " · ".join(f'<a href="#{anchor(s.title)}">{html.escape(s.title)}</a>' for s in sections)
    # one paragraph, no heading: the decision stays on the first screen
    body.append(f"<p class=toc><b>{CONTENTS_TITLE}:</b> {links}</p>")


def render(sections: list[Section], header: list[str], title: str) -> tuple[str, str]:
    """(Markdown, HTML) of the whole report; Markdown links the PNGs under plots/, HTML embeds them."""
    md = [f"# {title}", ""]
    body = [f"<h1>{html.escape(title)}</h1>"]
    if sections and sections[0].title != BOTTOM_TITLE:
        _contents(sections, md, body)
    for section in sections:
        md += [f"## {section.title}", ""]
        body.append(f'<h2 id="{anchor(section.title)}">{html.escape(section.title)}</h2>')
        if section.intro:
            md += [section.intro, ""]
            body.append(f"<p>{html.escape(section.intro)}</p>")
        if section.lines:
            md += [*[f"- **{line}**" for line in section.lines], ""]
            body.append("<ul class=bottom>" + "".join(f"<li>{html.escape(x)}</li>" for x in section.lines) + "</ul>")
        for table in section.tables:
            md += [f"### {table.title}", "", markdown_table(table.text), ""]
            if table.caption:
                md += [f"*{table.caption}* (`tables/{table.name}.csv`)", ""]
            body.append(f"<h3>{html.escape(table.title)}</h3>{html_table(table.text, prose=table.prose)}")
            if table.caption:
                body.append(f"<p class=caption>{html.escape(table.caption)} (tables/{html.escape(table.name)}.csv)</p>")
        for plot in section.plots:
            md += [f"### {plot.title}", "", f"![{plot.title}](plots/{plot.name}.png)", ""]
            if plot.caption:
                md += [f"*{plot.caption}*", ""]
            data = base64.b64encode(plot.png).decode("ascii")
            body.append(
                f'<figure><h3>{html.escape(plot.title)}</h3><img alt="{html.escape(plot.title)}" '
                f'src="data:image/png;base64,{data}"><figcaption class=caption>{html.escape(plot.caption)}'
                "</figcaption></figure>"
            )
        if section.title == SUMMARY_TITLE and sections[0].title == BOTTOM_TITLE:
            _contents(sections, md, body)  # after the decision: the bottom line and its table fill the first screen
        for note in section.notes:
            md += [f"> Note: {note}", ""]
            body.append(
                absent_html(section)
                if section.absent and note == absent_line(section)
                else f"<p class=note>Note: {html.escape(note)}</p>"
            )
    md += [f"## {ABOUT_TITLE}", "", *[f"- {line}" for line in header], ""]
    body.append(f"<h2>{ABOUT_TITLE}</h2><ul>" + "".join(f"<li>{html.escape(h)}</li>" for h in header) + "</ul>")
    page = (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>"
    )
    return "\n".join(md), page


REPORT_MARK = ".mcq-report"  # in every folder `write` made: only such a folder is ever replaced


def write(sections: list[Section], out_dir: Path, *, header: list[str], title: str) -> list[Path]:
    """Write report.md, report.html, tables/*.csv and plots/*.png as the folder out_dir; returns the files written.

    The report is written into a fresh sibling folder and swapped in by renames, so an interrupted write leaves
    the previous report whole. An existing out_dir is replaced only when empty or made by this function (it holds
    REPORT_MARK); any other folder is refused with a UserError naming --out, and nothing in it is touched."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not (
        out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / REPORT_MARK).is_file())
    ):
        raise UserError(
            f"--out {out_dir}: exists and is not a report folder written by python -m src.compare; "
            f"give a new or empty folder"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    old: Path | None = None
    try:
        files = _write_files(sections, fresh, header=header, title=title)
        (fresh / REPORT_MARK).write_text("written by python -m src.compare; replaced whole on the next report\n")
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent)) / "report"
            os.replace(out_dir, old)
        os.replace(fresh, out_dir)
    except BaseException:
        if old is not None and old.exists() and not out_dir.exists():
            os.replace(old, out_dir)  # the previous report back in its place
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    finally:
        if old is not None:  # the previous report, once replaced: an empty folder or one this function made
            shutil.rmtree(old.parent, ignore_errors=True)
    return [out_dir / path.relative_to(fresh) for path in files]


def clean_floats(data: pd.DataFrame) -> pd.DataFrame:
    """The float columns rounded to 12 significant decimals and without negative zero, so that a CSV says 0.15, not
    0.15000000000000002 or -0.0 (well below any interval's width; the exact values are in MLflow).

    >>> clean_floats(pd.DataFrame({"d": [0.15000000000000002, -0.0], "m": ["a", "b"]}))["d"].tolist()
    [0.15, 0.0]
    """
    floats = data.select_dtypes("float").columns
    return data.assign(**{c: data[c].round(12) + 0.0 for c in floats}) if len(floats) else data


def _write_files(sections: list[Section], folder: Path, *, header: list[str], title: str) -> list[Path]:
    for sub in ("tables", "plots"):
        (folder / sub).mkdir()
    written = []
    for section in sections:
        for table in section.tables:
            path = folder / "tables" / f"{folder_name(table.name)}.csv"
            clean_floats(table.data).to_csv(path, index=False)
            written.append(path)
        for plot in section.plots:
            path = folder / "plots" / f"{folder_name(plot.name)}.png"
            path.write_bytes(plot.png)
            written.append(path)
    md, page = render(sections, header, title)
    for name, text in (("report.md", md), ("report.html", page)):
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


def log_comparison(
    out_dir: Path, *, tracking_uri: str, experiment_id: str, name: str, tags: dict[str, str], params: dict[str, object]
) -> str:
    """A run tagged kind=comparison holding the report folder as artifacts; returns its id."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    run = client.create_run(experiment_id, run_name=name, tags={**dict([COMPARISON_TAG]), **tags})
    try:
        for key, value in params.items():
            client.log_param(run.info.run_id, key, str(value)[:6000])
        with tempfile.TemporaryDirectory() as tmp:  # a snapshot, so the artifacts match what this call wrote
            shutil.copytree(out_dir, Path(tmp) / "report", dirs_exist_ok=True)
            client.log_artifacts(run.info.run_id, str(Path(tmp) / "report"))
    except Exception:
        client.set_terminated(run.info.run_id, "FAILED")
        raise
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def header_lines(runs: Runs | None, *, filters: dict[str, str]) -> list[str]:
    lines = [f"generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `python -m src.compare`"]
    if runs is not None:
        frame = runs.table
        lines += [
            f"tracking URI: {runs.tracking_uri}",
            f"experiment(s): {', '.join(sorted(runs.experiments.values()))}",
            f"sweep id(s): {', '.join(sorted(str(s) for s in frame['sweep_id'].dropna().unique())) or '–'}",
            f"models: {', '.join(sorted(frame['model'].astype(str).unique()))}",
            f"benchmarks: {', '.join(sorted(frame['benchmark'].astype(str).unique()))}",
        ]
    lines += [f"filter {k}: {v}" for k, v in filters.items() if v]
    return lines
