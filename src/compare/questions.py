"""Per-question disagreements, with what the model saw and said: for every question where the models of one
table (or two runs given to `--diff`) give different answers, the prompt as shown (question and labelled
options, from the run's `prompts.parquet`), each model's raw output, the parse and whether it was right.

The answers compared are those of the reference trial (the `original` variant, repetition 0; the first variant
where a set has no original), by option identity, INVALID its own answer (as in every metric).
"""

from __future__ import annotations

import pandas as pd

from src.common.errors import UserError
from src.metrics.display import fmt

from ..metrics.answers import ORIGINAL, answer_keys, correct_flags
from ..metrics.chance import trial_chance
from .load import Runs
from .tables.common import ONE_VARIANT_SETS, Built, Table, condition_groups, latest, slug

SHOWN_QUESTIONS = 20  # in the HTML and Markdown per table; its parquet file holds every one
PROMPT_CHARS = 400  # of a prompt in the page (its end); the parquet file holds it whole
COLUMNS = [
    "question_id",
    "model",
    "run_id",
    "variant_id",
    "prompt",
    "raw_output",
    "parsed_label",
    "parse_rule",
    "correct",
    "chance",
]


def reference_trials(records: pd.DataFrame) -> pd.DataFrame:
    """One trial per question: its reference order at repetition 0."""
    rows = records[records["repetition"] == 0] if "repetition" in records.columns else records
    original = rows[rows["variant_kind"] == ORIGINAL]
    missing = ~rows["question_id"].isin(original["question_id"])
    rows = pd.concat([original, rows[missing]]) if missing.any() else original
    return rows.drop_duplicates("question_id", keep="first")


def disagreements(
    answers: dict[str, pd.DataFrame], prompts: dict[str, pd.DataFrame], *, run_ids: dict[str, str] | None = None
) -> pd.DataFrame:
    """Rows (COLUMNS) for every question that all `answers` (model -> records) asked and on which their reference
    answers differ: one row per (question, model). `prompts` (model -> prompts.parquet table) give the prompt text;
    a model without one gets an empty prompt.

    >>> base = {"variant_kind": "original", "variant_id": "original", "repetition": 0, "prompt_hash": "h",
    ...         "raw_output": "A", "parse_rule": "first_token"}
    >>> a = pd.DataFrame({**base, "question_id": ["q1", "q2"], "parsed_label": ["A", "B"], "chosen_option": [0, 1],
    ...                   "correct": [True, False]})
    >>> b = a.assign(parsed_label=["A", None], chosen_option=[0, None], correct=[True, False])
    >>> disagreements({"m1": a, "m2": b}, {})[["question_id", "model", "parsed_label"]].values.tolist()
    [['q2', 'm1', 'B'], ['q2', 'm2', 'INVALID']]
    """
    frames = {
        model: _trial_rows(reference_trials(records), prompts.get(model)).assign(
            model=model, run_id=(run_ids or {}).get(model, "")
        )
        for model, records in answers.items()
    }
    if len(frames) < 2:
        return pd.DataFrame(columns=COLUMNS)
    shared = set.intersection(*(set(f["question_id"]) for f in frames.values()))
    long = pd.concat([f[f["question_id"].isin(shared)] for f in frames.values()], ignore_index=True)
    differ = long.groupby("question_id")["answer"].nunique()
    long = long[long["question_id"].isin(differ[differ > 1].index)]
    return long.sort_values(["question_id", "model"], kind="stable")[COLUMNS].reset_index(drop=True)


def _trial_rows(trials: pd.DataFrame, prompts: pd.DataFrame | None) -> pd.DataFrame:
    """What the disagreement tables show of some trials: the prompt text, output, parse, right, chance."""
    lookup = prompts.set_index("prompt_hash")["prompt"] if prompts is not None and not prompts.empty else pd.Series()
    n_options = trials["n_options"] if "n_options" in trials else pd.Series(0, index=trials.index)
    fmts = trials["fmt"].fillna("mcq") if "fmt" in trials else pd.Series("mcq", index=trials.index)
    return pd.DataFrame(
        {
            "question_id": trials["question_id"].astype(str).to_numpy(),
            "answer": answer_keys(trials),
            "variant_id": trials["variant_id"].astype(str).to_numpy(),
            "prompt": trials["prompt_hash"].map(lookup).fillna("").to_numpy() if "prompt_hash" in trials else "",
            "raw_output": trials["raw_output"].to_numpy() if "raw_output" in trials else None,
            "parsed_label": trials["parsed_label"].fillna("INVALID").astype(str).to_numpy(),
            "parse_rule": trials["parse_rule"].to_numpy() if "parse_rule" in trials else None,
            "correct": correct_flags(trials),
            "chance": [trial_chance(k, f) for k, f in zip(n_options, fmts)],
        }
    )


def variant_disagreements(
    records: pd.DataFrame, prompts: pd.DataFrame | None, *, model: str, run_id: str
) -> pd.DataFrame:
    """Rows (COLUMNS, `model` the run's model) for every question whose variants, at repetition 0, got answers
    that pick different original options: one row per (question, variant)."""
    rows = records[records["repetition"] == 0] if "repetition" in records.columns else records
    frame = _trial_rows(rows, prompts).assign(model=model, run_id=run_id)
    differ = frame.groupby("question_id")["answer"].nunique()
    frame = frame[frame["question_id"].isin(differ[differ > 1].index)]
    return frame.sort_values(["question_id", "variant_id"], kind="stable")[COLUMNS].reset_index(drop=True)


def disagreement_table(
    rows: pd.DataFrame,
    *,
    title: str,
    name: str,
    caption: str,
    by: str = "model",
    shown_questions: int = SHOWN_QUESTIONS,
) -> Table:
    """tables/NAME.parquet holds every row (`Table.columnar`); the page the first `shown_questions` questions, a
    prompt cut at PROMPT_CHARS; `by` is the column that tells the rows of a question apart (model, or variant_id)."""
    questions = list(dict.fromkeys(rows["question_id"]))
    shown = rows[rows["question_id"].isin(questions[:shown_questions])]
    text = pd.DataFrame(
        {
            by.replace("_id", ""): shown[by].to_numpy(),
            # the end of a prompt is the question asked and its options (instructions and few-shot examples come first)
            "prompt as shown": [p if len(p) <= PROMPT_CHARS else "… " + p[-PROMPT_CHARS:] for p in shown["prompt"]],
            "output": shown["raw_output"].astype(str).to_numpy(),
            "parse": [
                f"{label} ({rule})" if rule else label
                for label, rule in zip(shown["parsed_label"], shown["parse_rule"].fillna(""))
            ],
            "right": ["yes" if c else "no" for c in shown["correct"]],
            "chance": shown["chance"].map(fmt).to_numpy(),
        },
        index=pd.Index(shown["question_id"].to_numpy(), name="question"),
    )
    more = (
        f"; first {shown_questions} of {len(questions)} questions shown, all in the parquet file"
        if len(questions) > shown_questions
        else ""
    )
    return Table(
        title=title,
        data=rows,
        text=text,
        name=name,
        columnar=True,
        caption=f"{len(questions)} question{'s' if len(questions) != 1 else ''} answered differently"
        f"{more}. {caption} Parse: the label read from the output (INVALID: none) and the rule that "
        "read it (src/core/parsing.py); chance: 1/k for the k options of that question as shown.",
    )


def model_disagreements(runs: Runs) -> Built:
    """Per benchmark and condition (the CoRA table's grouping: runs that differ only in the model), the questions
    the models answer differently on the reference order. `runs` is a `load.Runs` (records read from MLflow)."""
    out = Built()
    for benchmark, label, rows, _ in condition_groups(runs.table, axes=("model",)):
        rows = latest(rows, ["model"])
        if len(rows) < 2:
            continue
        answers, prompts, ids = {}, {}, {}
        try:
            for _, r in rows.iterrows():
                answers[r["model"]] = runs.records(r["run_id"])
                prompts[r["model"]] = runs.prompts(r["run_id"])
                ids[r["model"]] = r["run_id"]
        except UserError as err:
            out.notes.append(f"disagreements, {benchmark} {label}: records not readable ({err})")
            continue
        found = disagreements(answers, prompts, run_ids=ids)
        title = f"{benchmark}" + (f" ({label})" if label else "") + f", {rows['variants'].iloc[0]}"
        if found.empty:
            out.notes.append(f"disagreements, {title}: the models give the same answer to every shared question")
            continue
        out.tables.append(
            disagreement_table(
                found,
                title=title,
                name=slug("disagreements", benchmark, label),
                caption="Reference order, repetition 0; models compared on the questions all of them asked.",
            )
        )
    return out


VARIANT_QUESTIONS_SHOWN = 2  # a divergent set has up to 26 variants per question: the page shows two questions


def run_variant_disagreements(runs: Runs) -> Built:
    """Per run of a variant set with several orders or option lists per question (not `original`): the questions
    whose variants got answers that pick different options, every variant with its prompt, output and parse."""
    out = Built()
    frame = runs.table[~runs.table["variants"].isin(ONE_VARIANT_SETS)]
    for _, r in frame.sort_values(["benchmark", "variants", "model"]).iterrows():
        try:
            found = variant_disagreements(
                runs.records(r["run_id"]), runs.prompts(r["run_id"]), model=r["model"], run_id=r["run_id"]
            )
        except UserError as err:
            out.notes.append(f"variant disagreements of run {r['run_id'][:8]}: records not readable ({err})")
            continue
        if found.empty:
            continue
        title = f"{r['model']} on {r['benchmark']}, {r['variants']} (T={r['temperature']:g}, run {r['run_id'][:8]})"
        out.tables.append(
            disagreement_table(
                found,
                title=title,
                by="variant_id",
                shown_questions=VARIANT_QUESTIONS_SHOWN,
                name=slug("variant_disagreements", r["benchmark"], r["variants"], r["model"], r["run_id"][:8]),
                caption="Repetition 0; every variant of a question whose variants pick different options.",
            )
        )
    return out
