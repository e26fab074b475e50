"""Benchmark loaders on the real data (counts from data/SOURCES.md), the generic loader and synthetic."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path

import pytest

from src.benchmarks import BENCHMARKS, load_benchmark, load_fewshot_pool
from src.benchmarks.synthetic import KINDS
from src.common.errors import UserError

DATA_DIR = Path(os.environ.get("MCQ_DATA_DIR", Path(__file__).parents[1] / ".." / "shared" / "data")).resolve()
needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"benchmark data not found at {DATA_DIR} (set MCQ_DATA_DIR)"
)

# (benchmark, split, options) -> (questions, questions with a repeated option text). Counts are
# SOURCES.md's; the duplicates are in the files themselves (kept, marked in metadata, named in one
# warning per load; case counts: "Bb" and "bb" are different genotypes).
EXPECTED = {
    ("mmlu", None, ()): (14_042, 9),
    ("mmlu", "dev", ()): (285, 1),
    ("mmlu", "val", ()): (1_531, 3),
    ("mmlu_redux", None, ()): (5_700, 7),
    ("arc_challenge", None, ()): (1_172, 0),
    ("arc_challenge", "dev", ()): (299, 0),
    ("arc_challenge", "train", ()): (1_119, 0),
    ("arc_easy", None, ()): (2_376, 0),
    ("truthfulqa_mc1", None, ()): (817, 0),
    ("truthfulqa_mc1", None, (("version", "2025"),)): (790, 0),
    ("truthfulqa_mc2", None, ()): (817, 0),
    ("truthfulqa_mc2", None, (("version", "2025"),)): (790, 0),
    ("medqa", None, ()): (1_273, 0),
    ("medqa_4", None, ()): (1_273, 0),
    ("medmcqa", None, ()): (4_183, 21),
    ("commonsenseqa", None, ()): (1_221, 24),
    ("hellaswag", None, ()): (10_042, 0),
    ("winogrande", None, ()): (1_267, 0),
}


@cache
def load(name: str, split: str | None = None, options: tuple = ()) -> tuple:
    return tuple(load_benchmark(name, path=None, data_dir=str(DATA_DIR), split=split, options=dict(options)))


def by_id(name: str, qid: str, **kw):
    return next(q for q in load(name, **kw) if q.id == qid)


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("key", list(EXPECTED), ids=lambda k: "-".join(str(p) for p in k if p))
def test_counts_and_invariants(key):
    questions = load(*key)
    count, duplicates = EXPECTED[key]
    assert len(questions) == count
    assert len({q.id for q in questions}) == count
    for q in questions:
        assert q.question.strip() and q.n_options >= 2 and 0 <= q.answer < q.n_options
        assert all(isinstance(o, str) and o.strip() for o in q.options)
        distinct = len({o.strip() for o in q.options}) == q.n_options
        assert distinct != bool(q.metadata.get("duplicate_options")), q.id
    assert sum(bool(q.metadata.get("duplicate_options")) for q in questions) == duplicates


def test_every_registered_benchmark_is_tested():
    # lm_eval: tests/test_lm_eval_benchmark.py, and tests/test_lm_eval_tasks.py (the lm_eval tier) on real tasks
    assert {k[0] for k in EXPECTED} | {"synthetic", "generic", "lm_eval"} == set(BENCHMARKS)


@needs_data
def test_mmlu_first_record_and_subjects():
    questions = load_benchmark("mmlu", path=None, data_dir=str(DATA_DIR))
    q = questions[0]
    assert q.id == "mmlu/abstract_algebra/test/0" and q.subject == "abstract_algebra"
    assert q.question.startswith("Find the degree for the given field extension")
    assert q.options == ("0", "4", "2", "6") and q.answer == 1
    assert len({q.subject for q in questions}) == 57
    anatomy = load_benchmark("mmlu", path=None, data_dir=str(DATA_DIR), options={"subjects": ["anatomy"]}, limit=3)
    assert [q.id for q in anatomy] == [f"mmlu/anatomy/test/{i}" for i in range(3)]


@needs_data
def test_mmlu_redux_quirks():
    questions = load("mmlu_redux")
    anatomy = [q for q in questions if q.subject == "anatomy"]  # a ';'-delimited file
    assert len(anatomy) == 100 and all(q.n_options == 4 for q in anatomy)
    moral = [q for q in questions if q.subject == "moral_scenarios"]  # the file with byte 0xD5
    assert len(moral) == 100 and sum("sister\ufffds head" in q.question for q in moral) == 1
    types = {q.metadata["error_type"] for q in questions}
    assert types == {
        "ok",
        "bad_question_clarity",
        "bad_options_clarity",
        "wrong_groundtruth",
        "multiple_correct_answers",
        "no_correct_answer",
        "expert",
    }
    assert {q.metadata["error_type_raw"] for q in questions} >= {"OK", "Ok", "ok", "OK ", "Wrong Groundtruth"}
    ok = load("mmlu_redux", options=(("only_ok", True),))
    assert len(ok) == 5_330 and all(q.metadata["error_type"] == "ok" for q in ok)
    assert questions[0].id == "mmlu_redux/abstract_algebra/0"


@needs_data
def test_arc_labels_and_official_answer_key():
    q = by_id("arc_challenge", "Mercury_7175875")
    assert q.answer == 2 and q.options[2] == "Planetary days will become shorter."
    q = by_id("arc_challenge", "NYSEDREGENTS_2008_8_34")  # labelled 1-4
    assert q.metadata["labels"] == ("1", "2", "3", "4") and q.answer == 1
    assert sum(q.metadata["labels"][0] == "1" for q in load("arc_challenge")) == 22
    key = [json.loads(line) for line in (DATA_DIR / "arc_challenge/question-answers.jsonl").read_text().splitlines()]
    questions = {q.id: q for q in load("arc_challenge")}
    assert all(questions[k["id"]].metadata["labels"][questions[k["id"]].answer] == k["answerKey"] for k in key)


@needs_data
def test_truthfulqa_versions_subjects_and_mc2_sets():
    mc1 = load("truthfulqa_mc1")
    assert mc1[0].question == "What happens if you eat a pomegranate?"
    assert mc1[0].options[mc1[0].answer] == "Nothing in particular happens when you eat a pomegranate."
    assert all(q.subject for q in mc1) and len({q.subject for q in mc1}) == 38
    for q in load("truthfulqa_mc2"):
        assert q.answer in q.metadata["correct_set"]
    dropped = [
        q for q in load("truthfulqa_mc2", options=(("version", "2025"),)) if "empty_options_dropped" in q.metadata
    ]
    assert len(dropped) == 22
    shuffled = load_benchmark("truthfulqa_mc2", path=None, data_dir=str(DATA_DIR), seed=1, options={"shuffle": True})
    assert len({q.answer for q in shuffled}) > 1
    for q, orig in zip(shuffled, load("truthfulqa_mc2")):
        assert q.options[q.answer] == orig.options[orig.answer]
        assert {q.options[i] for i in q.metadata["correct_set"]} == {
            orig.options[i] for i in orig.metadata["correct_set"]
        }


@needs_data
def test_medical_records():
    medqa = load("medqa")
    assert medqa[0].id == "medqa/0" and medqa[0].options[medqa[0].answer] == medqa[0].metadata["answer_text"]
    assert all(q.n_options == 5 for q in medqa)
    subjects = [q.subject for q in load("medqa_4")]
    assert subjects.count("step1") == 679 and subjects.count("step2&3") == 594
    first = load("medmcqa")[0]
    assert first.options[0] == "Impulse through myelinated fibers is slower than non-myelinated fibers"
    raw = [json.loads(line)["choices"] for line in (DATA_DIR / "medmcqa/validation.jsonl").read_text().splitlines()]
    assert [q.options for q in load("medmcqa")] == [tuple(c[3:] for c in choices) for choices in raw]
    assert all(c[:3] == f"{'ABCD'[i]}. " for choices in raw for i, c in enumerate(choices))
    # the source itself repeats the label in one question ("A. A. Dermatitits herpetiformis"): one is kept
    assert load("medmcqa")[1641].options[0] == "A. Dermatitits herpetiformis"


@needs_data
def test_commonsense_records():
    q = load("hellaswag")[0]
    assert (q.id, q.subject, q.answer) == ("hellaswag/0", "Roof shingle removal", 3)
    assert q.question == "Roof shingle removal: A man is sitting on a roof. He"  # lm-eval's query: ctx_b capitalised
    assert q.options[3] == "starts pulling up roofing on a roof."
    q = load("winogrande")[0]
    assert q.id == "winogrande/0" and q.options == ("Sarah", "Maria") and q.answer == 1
    labels = (DATA_DIR / "winogrande/dev-labels.lst").read_text().split()
    assert [str(q.answer + 1) for q in load("winogrande")] == labels
    q = load("commonsenseqa")[0]
    assert q.id == "1afa02df02c908a558b4036e80242fac" and q.options[q.answer] == "bank" and q.n_options == 5


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("name", ["mmlu", "arc_easy", "hellaswag", "medqa"])
def test_limit_keeps_file_order(name):
    assert tuple(load_benchmark(name, path=None, data_dir=str(DATA_DIR), limit=7)) == load(name)[:7]


@needs_data
def test_fewshot_pools():
    assert len(load_fewshot_pool("mmlu", data_dir=str(DATA_DIR))) == 285
    pool = load_fewshot_pool("mmlu_redux", data_dir=str(DATA_DIR), subject="anatomy")
    assert len(pool) == 5 and {q.split for q in pool} == {"dev"}
    assert len(load_fewshot_pool("arc_challenge", data_dir=str(DATA_DIR))) == 1_119
    for name in ("arc_easy", "medqa", "truthfulqa_mc1"):
        with pytest.raises(UserError):
            load_fewshot_pool(name, data_dir=str(DATA_DIR))
    explicit = load_fewshot_pool("medqa", data_dir=str(DATA_DIR), path=str(DATA_DIR / "medqa/test.jsonl"))
    assert len(explicit) == 1_273 and explicit[0].split == "fewshot"


# --- no data needed ---------------------------------------------------------------------------


def synthetic(seed=0, **options):
    return load_benchmark("synthetic", path=None, data_dir="/nonexistent", seed=seed, options=options)


def test_synthetic_deterministic_per_seed_and_varied_across_seeds():
    assert synthetic(0) == synthetic(0)
    assert [q.question for q in synthetic(0)] != [q.question for q in synthetic(1)]
    assert len(synthetic(5, n_questions=7)) == 7


def test_synthetic_questions_are_well_formed_and_correct():
    questions = synthetic(3, n_questions=400)
    assert len({q.id for q in questions}) == 400 and {q.subject for q in questions} == set(KINDS)
    assert {q.n_options for q in questions} == {4, 5}
    assert len({q.question for q in questions}) > 350
    for n in (4, 5):
        counts = [sum(q.answer == i for q in questions if q.n_options == n) for i in range(n)]
        assert max(counts) - min(counts) <= 1 + len(KINDS)  # balanced decks, up to shuffling rounds
    for q in questions:
        assert len({o.strip() for o in q.options}) == q.n_options
        right = q.options[q.answer]
        if m := re.fullmatch(r"What is (\d+) (\+|-|times) (\d+)\?", q.question):
            a, op, b = int(m[1]), m[2], int(m[3])
            assert int(right) == {"+": a + b, "-": a - b, "times": a * b}[op]
        if m := re.fullmatch(r"Which number is the (largest|smallest): (.*)\?", q.question):
            numbers = [int(x) for x in m[2].split(", ")]
            assert int(right) == (max if m[1] == "largest" else min)(numbers)


def test_synthetic_fewshot_pool_differs_from_test_questions():
    pool = load_fewshot_pool("synthetic", data_dir="/nonexistent", subject="addition")
    assert (
        pool and {q.subject for q in pool} == {"addition"} and all(q.id.startswith("synthetic/fewshot/") for q in pool)
    )


def test_generic_formats(tmp_path):
    rows = [
        {"id": "q1", "question": "2 + 2 = ?", "options": ["3", "4", "5"], "answer": 1, "subject": "math", "note": "x"},
        {"question": "Capital of France?", "options": ["Paris", "Rome"], "answer": "A"},
    ]
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    qs = load_benchmark("generic", path=str(jsonl), data_dir="/nonexistent")
    assert [q.id for q in qs] == ["q1", "mine/1"] and [q.answer for q in qs] == [1, 0]
    assert qs[0].subject == "math" and qs[0].metadata == {"note": "x"}

    csv_file = tmp_path / "letters.csv"
    csv_file.write_text('question,A,B,C,D,answer\n"Largest, please?",1,9,3,,B\nSmallest?,1,9,3,7,0\n')
    qs = load_benchmark("generic", path=str(csv_file), data_dir="/nonexistent")
    assert qs[0].options == ("1", "9", "3") and qs[0].answer == 1 and qs[1].n_options == 4

    numbered = tmp_path / "numbered.csv"
    numbered.write_text("question,option_0,option_1,answer\nUp?,yes,no,0\n")
    assert load_benchmark("generic", path=str(numbered), data_dir="/x")[0].options == ("yes", "no")

    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    parquet = tmp_path / "mine.parquet"
    pd.DataFrame({"question": ["Sky?"], "options": [["blue", "green"]], "answer": [0]}).to_parquet(parquet)
    q = load_benchmark("generic", path=str(parquet), data_dir="/x")[0]
    assert q.options == ("blue", "green") and q.answer == 0 and q.id == "mine/0"
