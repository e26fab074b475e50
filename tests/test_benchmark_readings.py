"""HellaSwag and WinoGrande read as lm-evaluation-harness reads them, from the Hub's rows and from the raw files alike.

Each benchmark has one row converter (src/benchmarks/commonsense.py); the file loaders turn their records into the
Hub's rows for it. The rows below are written for the test in the Hub's form: HellaSwag's first validation row as
rowanz/hellaswag publishes it (an ActivityNet item: ctx_b "he"), one whose ctx_b holds quotes, and a WikiHow-like one
with lm-eval's [markers]; the raw file of each is written the way the shared one was made (klosax's
extract_hellaswag.cpp, `_klosax_clean` below). The fast tests compare with lm-eval's readings, taken once by running
lm_eval/tasks/hellaswag/utils.py `process_docs` and lm_eval/tasks/winogrande/preprocess_winogrande.py on these rows
(lm-eval 0.4.13); the lm_eval tier calls those functions themselves on the same rows (tests/test_lm_eval_tasks.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from src.benchmarks import load_benchmark
from src.benchmarks.commonsense import hellaswag_question, winogrande_question

from .conftest import DATA_DIR, needs_data

pytestmark = pytest.mark.promise(
    "docs/configuration.md", "HellaSwag's text and WinoGrande's ids are the same from the files and the Hub (lm-eval's)"
)

HELLASWAG_ROWS = [
    {
        "ind": 24,
        "activity_label": "Roof shingle removal",
        "ctx_a": "A man is sitting on a roof.",
        "ctx_b": "he",
        "endings": [
            "is using wrap to wrap a pair of skis.",
            "is ripping level tiles off.",
            "is holding a rubik's cube.",
            "starts pulling up roofing on a roof.",
        ],
        "label": "3",
    },
    {
        "ind": 7,
        "activity_label": "Cutting the grass",
        "ctx_a": 'The words "the good works tour" appear on screen.',
        "ctx_b": 'a volunteer named " irene "',
        "endings": ["walks up to the camera.", "mows the lawn.", "waves.", "sits."],
        "label": "1",
    },
    {
        "ind": 9,
        "activity_label": "Home and Garden",
        "ctx_a": "[header] How to plant a tree [title] Dig a hole. [step] Make it twice as wide as the root ball.",
        "ctx_b": "",
        "endings": [
            "[substeps] Water the hole first.",
            "Visit a site like [www.trees.org] for advice.",
            "[title] Place the tree. [step] Set it straight.",
            "Fill  the hole.",
        ],
        "label": "0",
    },
]
# lm-eval's process_docs of HELLASWAG_ROWS (query, choices, gold), run once; the tool strips each text's edges
# (validate.clean_text), so the choices lm-eval leaves with a leading space where a [marker] opened them are stripped.
LM_EVAL_HELLASWAG = [
    (
        "Roof shingle removal: A man is sitting on a roof. He",
        (
            "is using wrap to wrap a pair of skis.",
            "is ripping level tiles off.",
            "is holding a rubik's cube.",
            "starts pulling up roofing on a roof.",
        ),
        3,
    ),
    (
        'Cutting the grass: The words "the good works tour" appear on screen. A volunteer named " irene "',
        ("walks up to the camera.", "mows the lawn.", "waves.", "sits."),
        1,
    ),
    (
        "Home and Garden: How to plant a tree. Dig a hole. Make it twice as wide as the root ball.",
        (
            "Water the hole first.",
            "Visit a site like for advice.",
            "Place the tree. Set it straight.",
            "Fill the hole.",
        ),
        0,
    ),
]

WINOGRANDE_ROWS = [
    {
        "qID": "3FCO4VKOZ4BJQ6IFC0VAIBK4KTWE7U-2",
        "sentence": "Sarah was a much better surgeon than Maria so _ always got the easier cases.",
        "option1": "Sarah",
        "option2": "Maria",
        "answer": "2",
    },
    {
        "qID": "T1",
        "sentence": "The trophy didn't fit in the suitcase because the _ was too big.",
        "option1": "trophy",
        "option2": "suitcase",
        "answer": "1",
    },
]
# lm-eval's doc_to_text (the gold choice) and doc_to_choice (the sentence up to the blank + each option), run once
SARAH, TROPHY = "Sarah was a much better surgeon than Maria so ", "The trophy didn't fit in the suitcase because the "
LM_EVAL_WINOGRANDE = [(1, [SARAH + "Sarah", SARAH + "Maria"]), (0, [TROPHY + "trophy", TROPHY + "suitcase"])]


def _klosax_clean(text: str) -> str:
    """`preprocess_data` of klosax/hellaswag_text_data's extract_hellaswag.cpp, which made the shared text file."""
    for search, replace in (
        ("[header]", ""),
        ("[step]", ""),
        ("[substeps]", ""),
        (" [title]", ". "),
        ("[title] ", ""),
        ("[title].", ""),
        ("  ", " "),
    ):
        text = text.replace(search, replace)
    return text[1:] if text.startswith(" ") else text


def _hellaswag_file(folder: Path, rows: list[dict]) -> Path:
    """The rows as the 6-line text file: `activity_label: ctx` (ctx = ctx_a ctx_b, as the source's `ctx` field),
    the label, the 4 endings."""
    lines = []
    for row in rows:
        ctx = f"{row['ctx_a']} {row['ctx_b']}" if row["ctx_b"] else row["ctx_a"]
        lines += [f"{_klosax_clean(row['activity_label'])}: {_klosax_clean(ctx)}", row["label"]]
        lines += [_klosax_clean(ending) for ending in row["endings"]]
    path = folder / "hellaswag_val_full.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read(questions) -> list[tuple]:
    return [(q.question, q.options, q.answer) for q in questions]


def test_hellaswag_hub_rows_and_file_read_as_lm_eval_reads_them(tmp_path):
    rows = HELLASWAG_ROWS
    from_hub = [hellaswag_question(r, qid=f"hellaswag/{n}", place="t", split="val") for n, r in enumerate(rows)]
    from_file = load_benchmark("hellaswag", path=str(_hellaswag_file(tmp_path, rows)), data_dir=str(tmp_path))
    assert _read(from_hub) == _read(from_file) == LM_EVAL_HELLASWAG
    assert [q.id for q in from_file] == [q.id for q in from_hub] == ["hellaswag/0", "hellaswag/1", "hellaswag/2"]
    assert [q.subject for q in from_file] == [r["activity_label"] for r in rows]


@needs_data
def test_the_shared_hellaswag_files_first_item_is_lm_evals_reading_of_the_hubs_first_row():
    (first,) = load_benchmark("hellaswag", path=None, data_dir=str(DATA_DIR), limit=1)
    assert _read([first]) == LM_EVAL_HELLASWAG[:1]


def test_winogrande_ids_and_answers_are_the_same_from_file_and_hub_rows(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in WINOGRANDE_ROWS), encoding="utf-8")
    from_file = load_benchmark("winogrande", path=str(path), data_dir=str(tmp_path))
    hub_rows = [{k: v for k, v in row.items() if k != "qID"} for row in WINOGRANDE_ROWS]  # the Hub has no qID
    from_hub = [winogrande_question(r, qid=f"winogrande/{n}", place="t", split="dev") for n, r in enumerate(hub_rows)]
    assert from_file == from_hub  # id, text, options, answer, subject and split
    assert [q.id for q in from_file] == ["winogrande/0", "winogrande/1"]
    blank = [q.question[: q.question.index("_")] for q in from_file]
    assert [(q.answer, [b + o for o in q.options]) for q, b in zip(from_file, blank)] == LM_EVAL_WINOGRANDE
