"""Answer positions balanced and reported, clean texts in every loader, duplicate options
named."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from functools import cache

import pytest

from src.benchmarks import BENCHMARKS, load_benchmark
from src.benchmarks.position import (
    answer_slot_counts,
    answer_slot_warning,
    describe_answer_slots,
    expected_slot_shares,
    fixed_answer_slot,
)
from src.benchmarks.validate import clean_text, duplicate_option_groups
from src.core.questions import Question
from src.data import main as data_main

from .conftest import DATA_DIR, REPO, needs_data

# the benchmarks whose files ../shared/data holds (lm_eval reads a task through lm-evaluation-harness: its texts are
# checked against lm-eval's own in tests/test_lm_eval_tasks.py)
SHIPPED = [name for name in BENCHMARKS if name not in ("synthetic", "generic", "lm_eval")]
DOUBLE_QUOTES = '"\u201c\u201d'


@cache
def load(name: str, seed: int = 0, **options) -> tuple[Question, ...]:
    return tuple(load_benchmark(name, path=None, data_dir=str(DATA_DIR), seed=seed, options=options))


def slot_a_share(questions) -> float:
    return sum(q.answer == 0 for q in questions) / len(questions)


# --- answer position --------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("name", ["truthfulqa_mc1", "truthfulqa_mc2"])
def test_truthfulqa_options_are_shuffled_by_default(name):
    file_order = load(name, shuffle=False)
    assert all(q.answer == 0 for q in file_order)  # the file puts a true answer first
    shuffled = load(name)
    # With 2-13 (mc1) / 2-24 (mc2) options, a uniformly random order puts the answer in slot A for the
    # mean of 1/n_options of the questions: 22.3% (mc1), 15.0% (mc2). Three standard errors of 817 draws.
    expected = sum(1 / q.n_options for q in shuffled) / len(shuffled)
    assert expected == pytest.approx(expected_slot_shares(shuffled)[0])
    assert 0.2 < expected < 0.25 if name == "truthfulqa_mc1" else 0.13 < expected < 0.17
    se = (expected * (1 - expected) / len(shuffled)) ** 0.5
    for seed in (0, 1, 2):
        share = slot_a_share(load(name, seed))
        assert share < 0.4 and abs(share - expected) < 3 * se, (seed, share, expected)
    counts = answer_slot_counts(shuffled)
    assert sum(counts.values()) == len(shuffled) and max(counts) == max(q.n_options for q in shuffled) - 1
    assert fixed_answer_slot(shuffled) is None and fixed_answer_slot(file_order) == 0
    for q, orig in zip(shuffled, file_order):  # same question, same options, the answer follows its text
        assert q.id == orig.id and sorted(q.options) == sorted(orig.options)
        assert q.options[q.answer] == orig.options[orig.answer]
        assert tuple(orig.options[i] for i in q.metadata["original_order"]) == q.options


@needs_data
def test_truthfulqa_shuffle_is_deterministic_per_seed():
    fresh = load_benchmark("truthfulqa_mc1", path=None, data_dir=str(DATA_DIR), seed=7)
    again = load_benchmark("truthfulqa_mc1", path=None, data_dir=str(DATA_DIR), seed=7)
    assert [(q.options, q.answer) for q in fresh] == [(q.options, q.answer) for q in again]
    other = load("truthfulqa_mc1", 8)
    assert [q.options for q in fresh] != [q.options for q in other]
    # the same in another process (string seeds do not depend on PYTHONHASHSEED)
    code = (
        "from src.benchmarks import load_benchmark; import sys; "
        f"print([q.answer for q in load_benchmark('truthfulqa_mc1', path=None, data_dir={str(DATA_DIR)!r}, seed=7)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    ).stdout
    assert out.strip() == str([q.answer for q in fresh])


def test_truthfulqa_yaml_defaults_to_shuffle():
    for task in ("mc1", "mc2"):
        text = (REPO / "conf" / "benchmark" / f"truthfulqa_{task}.yaml").read_text()
        assert re.search(r"^shuffle: true\s+#.*false.*file order", text, re.M), text


def test_slot_summary_and_fixed_slot_rule():
    qs = [Question(id=str(i), question="?", options=("a", "b", "c", "d"), answer=i % 4) for i in range(8)]
    assert answer_slot_counts(qs) == {0: 2, 1: 2, 2: 2, 3: 2}
    assert describe_answer_slots(qs) == "answer slots: A 25% B 25% C 25% D 25% (n=8)"
    mixed = qs[:3] + [Question(id="x", question="?", options=("a", "b"), answer=1)]
    assert describe_answer_slots(mixed) == "answer slots: A 25% B 50% C 25% D 0% (n=4)"
    assert expected_slot_shares(mixed) == pytest.approx({0: 5 / 16, 1: 5 / 16, 2: 3 / 16, 3: 3 / 16})
    first = [Question(id=str(i), question="?", options=("a", "b", "c"), answer=0) for i in range(20)]
    assert fixed_answer_slot(first) == 0 and fixed_answer_slot(first[:19]) is None
    message = answer_slot_warning(first, "mine")
    assert message.startswith("mine: the answer is in slot A for 100% of 20 questions") and "\n" not in message
    assert answer_slot_warning(first, "truthfulqa_mc1").endswith("benchmark.shuffle=true balances it")
    halves = [Question(id=str(i), question="?", options=("a", "b"), answer=int(i % 2 or i < 10)) for i in range(100)]
    assert fixed_answer_slot(halves) is None  # 55% of 2-option answers in B: chance, not a fixed slot
    synthetic = load_benchmark("synthetic", path=None, data_dir="/nonexistent", seed=0)
    assert fixed_answer_slot(synthetic) is None


@needs_data
def test_fixed_slot_warned_once_per_load(caplog):
    with caplog.at_level(logging.WARNING, logger="src.benchmarks"):
        load_benchmark("truthfulqa_mc1", path=None, data_dir=str(DATA_DIR), options={"shuffle": False})
    warnings = [r.getMessage() for r in caplog.records if "slot" in r.getMessage()]
    assert warnings == [
        "truthfulqa_mc1: the answer is in slot A for 100% of 817 questions (fixed answer position "
        "in the file order); benchmark.shuffle=true balances it"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="src.benchmarks"):
        for name in ("truthfulqa_mc1", "winogrande", "medqa", "arc_easy"):
            load_benchmark(name, path=None, data_dir=str(DATA_DIR))
    assert not [r for r in caplog.records if "slot" in r.getMessage()]


@needs_data
def test_slots_command(capsys):
    assert data_main(["slots", "truthfulqa_mc1", "--data-dir", str(DATA_DIR), "--seed", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "truthfulqa_mc1: 817 questions, seed 0"
    rows = {line.split()[0]: line.split()[1:] for line in out[2:-1]}
    assert sum(int(count) for count, _, _ in rows.values()) == 817 and set(rows) == set("ABCDEFGHIJKLM")
    assert rows["A"][1].endswith("%") and float(rows["A"][1][:-1]) < 40
    assert out[-1].startswith("answer slots: A ") and out[-1].endswith("(n=817)")
    assert not any(line.startswith("warning:") for line in out)
    assert data_main(["slots", "medqa", "--data-dir", str(DATA_DIR), "--limit", "30"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("(n=30)")


def test_slots_command_warns_and_refuses(tmp_path, capsys):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        "".join(
            json.dumps({"question": f"Q{i}?", "options": ["yes", "no", "maybe"], "answer": 0}) + "\n" for i in range(25)
        )
    )
    assert data_main(["slots", "generic", "--path", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("warning: generic: the answer is in slot A for 100% of 25 questions")
    assert data_main(["slots", "generic", "--path", str(path), "--limit", "19"]) == 0
    assert not capsys.readouterr().out.count("warning:")
    proc = subprocess.run(
        [sys.executable, "-m", "src.data", "slots", "mmlu_pro"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and "'mmlu_pro'" in proc.stderr


# --- clean texts ------------------------------------------------------------------------------


def edge_debris(text: str) -> str | None:
    """What is wrong at the edges of `text`, judged independently of `clean_text`'s code."""
    if text != text.strip():
        return "surrounding whitespace"
    if text.startswith('"""') or text.endswith('"""'):
        return "tripled CSV quotes"
    n_quotes = sum(text.count(q) for q in DOUBLE_QUOTES)
    if re.search(r'\n"$', text) or (re.search(r'\s"$', text) and n_quotes % 2):  # MMLU law: paired '"taking. "' is fine
        return "a stray quote after whitespace"
    if text.endswith('"') and n_quotes == 1:
        return "a closing quote with no opening one"
    if text.endswith('"') and n_quotes % 2 and text[-2] in "?.!:":
        return "an unpaired closing quote"
    if text.startswith('"') and text.endswith('"') and '""' in text[1:-1]:
        return "a CSV field quoted twice"
    return None


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_texts_have_no_edge_debris(name):
    questions = load(name)
    problems = [
        (q.id, where, edge_debris(text))
        for q in questions
        for where, text in [("question", q.question), *((f"option {i}", o) for i, o in enumerate(q.options))]
        if edge_debris(text)
    ]
    assert problems == []


@needs_data
def test_medqa_debris_fixed_at_the_source():
    q = load("medqa")[7]
    assert q.options[4] == "Propranolol" and q.metadata["cleaned"] == ("option 4",)
    q = load("medqa")[155]  # a question field quoted twice that lost its opening quote
    assert 'repeatedly says, "The government is following me everywhere." His' in q.question
    assert q.question.endswith("symptoms?")
    q = load("medqa")[510]
    assert q.options[0] == '"Let\'s talk about what makes it difficult for you to take your medications."'
    for name in ("medqa", "medqa_4"):
        assert all(q.options[q.answer] == q.metadata["answer_text"] for q in load(name))
    q = load("medqa")[535]  # a quoted caption at the end pairs with its opening quote: kept
    assert q.question.endswith('Cardiovascular Health"')


@needs_data
def test_clean_options_are_unchanged():
    """Options that had no edge debris in the file come out byte for byte (MMLU test, read raw)."""
    import csv

    changed = clean = 0
    for file in sorted((DATA_DIR / "mmlu" / "test").glob("*.csv")):
        subject = file.stem.removesuffix("_test")
        rows = list(csv.reader(file.open(encoding="utf-8", newline="")))
        loaded = load_benchmark("mmlu", path=None, data_dir=str(DATA_DIR), options={"subjects": [subject]})
        for row, q in zip(rows, loaded):
            for raw, option in zip(row[1:5], q.options):
                if edge_debris(raw) is None:
                    assert option == raw, q.id
                    clean += 1
                else:
                    assert option != raw and option in raw.replace('""', '"'), q.id
                    changed += 1
            if edge_debris(row[0]) is None:
                assert q.question == row[0], q.id
    assert clean > 55_000 and changed == 152


def test_clean_text_keeps_inner_text(tmp_path):
    assert clean_text(" a  b \n") == "a  b"
    assert clean_text('the "second" one') == 'the "second" one'
    assert clean_text('" you can see') == '" you can see'  # HellaSwag: a quote the context opened
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "  Which?\n", "options": [" x", 'y\n"', "z  z"], "answer": 1}) + "\n")
    q = load_benchmark("generic", path=str(path), data_dir="/x")[0]
    assert (q.question, q.options, q.metadata["cleaned"]) == (
        "Which?",
        ("x", "y", "z  z"),
        ("question", "option 0", "option 1"),
    )
    synthetic = load_benchmark("synthetic", path=None, data_dir="/x", seed=0)
    assert all(edge_debris(t) is None for q in synthetic for t in (q.question, *q.options))
    assert not any("cleaned" in q.metadata for q in synthetic)


# --- duplicate option texts -------------------------------------------------------------------


def test_duplicate_option_groups():
    assert duplicate_option_groups(["Paris", "Rome", " Paris ", "Paris"]) == [(0, 2, 3)]
    assert duplicate_option_groups(["a b", "a  b", "c"]) == [(0, 1)]
    assert duplicate_option_groups(["Bb", "bb", "BB"]) == []  # genotypes: case is meaning
    assert duplicate_option_groups(["Bb", "bb"], casefold=True) == [(0, 1)]
    q = Question(id="q", question="?", options=("x", "y", "x"), answer=1)
    assert duplicate_option_groups(q) == [(0, 2)]


def test_duplicate_warning_one_line_per_load(tmp_path, caplog):
    path = tmp_path / "medmcqa.jsonl"
    records = [
        {"question": f"Q{i}?", "choices": ["A. x", "B. X " if i % 2 else "B. x", "C. y"], "answer": 2} for i in range(9)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with caplog.at_level(logging.WARNING, logger="src.benchmarks"):
        load_benchmark("medmcqa", path=str(path), data_dir="/x")
    assert [r.getMessage() for r in caplog.records] == [
        "medmcqa: 5 questions have duplicate option texts (medmcqa/0, medmcqa/2, medmcqa/4, ...); "
        "variants that would show both copies are not made"
    ]


@needs_data
def test_duplicate_warning_on_shipped_data(caplog):
    with caplog.at_level(logging.WARNING, logger="src.benchmarks"):
        load_benchmark("mmlu", path=None, data_dir=str(DATA_DIR))
    messages = [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()]
    assert len(messages) == 1 and messages[0].startswith("mmlu: 9 questions have duplicate option texts (mmlu/")
