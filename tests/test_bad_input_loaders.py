"""Bad benchmark files give one-line `UserError`s that name the file, the line or record, and a fix."""

from __future__ import annotations

import bz2
import json
import logging
from pathlib import Path

import pytest

from src.benchmarks import load_benchmark, load_fewshot_pool
from src.common.errors import UserError


def load(name: str, path: Path | str | None = None, **kw):
    return load_benchmark(
        name, path=None if path is None else str(path), data_dir=kw.pop("data_dir", "/nonexistent"), **kw
    )


def error_of(name: str, path: Path | str | None = None, *fragments: str, **kw) -> str:
    """Load, expect a UserError, check it is one line holding `path` and each fragment."""
    with pytest.raises(UserError) as info:
        load(name, path, **kw)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    for fragment in ((str(path),) if path is not None else ()) + fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def jsonl(tmp_path: Path, name: str, records: list, tail: str = "") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


MEDQA = {"question": "Q?", "options": {"A": "a", "B": "b", "C": "c", "D": "d"}, "answer_idx": "B", "meta_info": "step1"}


def test_missing_file_names_path_and_config_key(tmp_path):
    error_of("medqa", tmp_path / "nope.jsonl", "benchmark.path")
    message = error_of("mmlu", None, "data_dir", "/nonexistent/mmlu/test")
    assert "benchmark.path" in message
    error_of("generic", None, "benchmark.path")


def test_unknown_benchmark_option_split_limit():
    message = error_of("mmlu_pro", None, "config key benchmark", "'mmlu_pro'")
    assert "mmlu" in message and "synthetic" in message and "hellaswag" in message
    error_of("synthetic", None, "benchmark.subjects", options={"subjects": ["x"]})
    error_of("synthetic", None, "benchmark.n_questions", options={"n_questions": 0})
    error_of("synthetic", None, "benchmark.limit", limit=0)
    error_of("medqa", None, "benchmark.split", "'train'", split="train")
    error_of("truthfulqa_mc1", None, "benchmark.version", options={"version": "v3"})
    error_of("truthfulqa_mc2", None, "benchmark.shuffle", "'yes' is not true or false", options={"shuffle": "yes"})


def test_unknown_subject(tmp_path):
    (tmp_path / "anatomy_test.csv").write_text("Q?,a,b,c,d,A\n")
    error_of("mmlu", tmp_path, "benchmark.subjects", "'astronomy'", "anatomy", options={"subjects": "astronomy"})


def test_record_without_answer(tmp_path):
    path = jsonl(tmp_path, "medqa.jsonl", [MEDQA, {k: v for k, v in MEDQA.items() if k != "answer_idx"}])
    error_of("medqa", path, "line 2", "record medqa/1", "no answer")
    path = jsonl(tmp_path, "mine.jsonl", [{"question": "Q?", "options": ["a", "b"]}])
    error_of("generic", path, "line 1", "no answer")
    path = jsonl(tmp_path, "wino.jsonl", [{"qID": "w1", "sentence": "_ ran.", "option1": "A", "option2": "B"}])
    error_of("winogrande", path, "line 1", "record winogrande/0", "no answer")


def test_answer_out_of_range(tmp_path):
    path = jsonl(
        tmp_path,
        "mine.jsonl",
        [{"question": "Q?", "options": ["a", "b", "c", "d"], "answer": 1}] * 11
        + [{"id": "x12", "question": "Q?", "options": ["a", "b", "c", "d"], "answer": 7}],
    )
    error_of("generic", path, "line 12", "record x12", "answer index 7 is outside the 4 options")
    path = jsonl(tmp_path, "medmcqa.jsonl", [{"question": "Q?", "choices": ["A. a", "B. b"], "answer": 5}])
    error_of("medmcqa", path, "line 1", "record medmcqa/0", "answer index 5")
    path = jsonl(tmp_path, "medqa.jsonl", [dict(MEDQA, answer_idx="E")])
    error_of("medqa", path, "line 1", "'E' is not one of the option labels")
    arc = {
        "id": "Mercury_1",
        "question": {"stem": "Q?", "choices": [{"text": "a", "label": "A"}, {"text": "b", "label": "B"}]},
        "answerKey": "C",
    }
    error_of("arc_easy", jsonl(tmp_path, "arc.jsonl", [arc]), "record Mercury_1", "'C'")


def test_one_option_and_empty_question(tmp_path):
    path = jsonl(tmp_path, "mine.jsonl", [{"question": "Q?", "options": ["only"], "answer": 0}])
    error_of("generic", path, "line 1", "at least 2")
    path = jsonl(tmp_path, "mine2.jsonl", [{"question": "  ", "options": ["a", "b"], "answer": 0}])
    error_of("generic", path, "line 1", "question text is empty")
    path = jsonl(tmp_path, "wino.jsonl", [{"qID": "w1", "sentence": "", "option1": "A", "option2": "B", "answer": "1"}])
    error_of("winogrande", path, "record winogrande/0", "question text is empty")


def test_duplicate_options_refused_in_generic_kept_in_real_benchmarks(tmp_path):
    path = jsonl(tmp_path, "mine.jsonl", [{"question": "Q?", "options": ["a", "b ", " b"], "answer": 0}])
    error_of("generic", path, "line 1", "options 1 and 2 are the same text 'b'")
    path = jsonl(tmp_path, "case.jsonl", [{"question": "Cross?", "options": ["Bb", "bb", '"BB"\n'], "answer": 0}])
    assert load("generic", path)[0].options == ("Bb", "bb", '"BB"')  # case is meaning (genotypes); kept
    path = jsonl(tmp_path, "debris.jsonl", [{"question": "Q?", "options": ["b", 'b\n"'], "answer": 0}])
    error_of("generic", path, "line 1", "options 0 and 1 are the same text 'b'")  # the same once cleaned
    path = jsonl(tmp_path, "medmcqa.jsonl", [{"question": "Q?", "choices": ["A. x", "B. x", "C. y"], "answer": 2}])
    assert load("medmcqa", path)[0].metadata["duplicate_options"] is True


def test_duplicate_ids(tmp_path):
    path = jsonl(tmp_path, "mine.jsonl", [{"id": "a", "question": "Q?", "options": ["x", "y"], "answer": 0}] * 2)
    error_of("generic", path, "'a'", "unique")


def test_truncated_jsonl(tmp_path):
    path = jsonl(tmp_path, "medqa.jsonl", [MEDQA, MEDQA], tail=json.dumps(MEDQA)[:40])
    error_of("medqa", path, "line 3", "invalid JSON")
    path = tmp_path / "mc_task.json"
    path.write_text('[{"question": "Q?",\n "mc1_targets": {"a": 1, "b"')
    error_of("truthfulqa_mc1", path, "line 2", "invalid JSON")


def test_truncated_hellaswag(tmp_path):
    path = tmp_path / "hs.txt.bz2"
    path.write_bytes(bz2.compress(b"Act: ctx\n0\na\nb\nc\nd\nAct: ctx2\n1\na\nb\n"))
    error_of("hellaswag", path, "line 7", "record hellaswag/1", "truncated")
    path.write_bytes(bz2.compress(b"Act: ctx\n0\na\nb\nc\nd\n")[:-10])
    error_of("hellaswag", path, "bz2")


def test_csv_wrong_column_count(tmp_path):
    (tmp_path / "anatomy_test.csv").write_text('Q1?,a,b,c,d,A\n"Q2\nspans two lines",a,b,c,d,B\nQ3?,a,b,c,A\n')
    error_of("mmlu", tmp_path / "anatomy_test.csv", "line 4", "record mmlu/anatomy/test/2", "5 columns, expected 6")
    path = tmp_path / "mine.csv"
    path.write_text("question,options,answer\nQ?,\"['a','b']\",0\nQ2?,\"['a','b']\",0,extra\n")
    error_of("generic", path, "line 3", "4 columns, expected 3")
    redux = tmp_path / "mmlu_anatomy.csv"
    redux.write_text("question;choices;answer;error_type\nQ?;['a', 'b'];0;ok\nQ?;['a', 'b'];0\n")
    error_of("mmlu_redux", redux, "line 3", "record mmlu_redux/anatomy/1", "3 columns, expected 4")


def test_bad_answer_letter_and_choices_literal(tmp_path):
    (tmp_path / "anatomy_test.csv").write_text("Q?,a,b,c,d,E\n")
    error_of("mmlu", tmp_path / "anatomy_test.csv", "line 1", "'E' is not one of A, B, C, D")
    redux = tmp_path / "mmlu_anatomy.csv"
    redux.write_text("question,choices,answer\nQ?,\"['a', 'b'\",0\n")
    error_of("mmlu_redux", redux, "line 2", "Python list literal")


def test_non_utf8_bytes(tmp_path, caplog):
    path = tmp_path / "mine.csv"
    path.write_bytes(b"question,A,B,answer\nok?,a,b,0\ncaf\xe9?,a,b,0\n")
    error_of("generic", path, "line 3", "0xE9", "UTF-8")
    # a real benchmark file is read as it is: the bad byte becomes U+FFFD, with a warning
    redux = tmp_path / "mmlu_moral_scenarios.csv"
    redux.write_bytes(b"question,choices,answer,error_type\nmy sister\xd5s head?,\"['Wrong', 'Not wrong']\",0,OK \n")
    with caplog.at_level(logging.WARNING):
        (q,) = load("mmlu_redux", redux)
    assert q.question == "my sister\ufffds head?" and q.metadata["error_type"] == "ok"
    assert "0xD5" in caplog.text


def test_fewshot_errors_name_what_to_do(tmp_path):
    with pytest.raises(UserError, match="few-shot"):
        load_fewshot_pool("generic", data_dir="/nonexistent")
    with pytest.raises(UserError, match="the few-shot path"):
        load_fewshot_pool("arc_challenge", data_dir="/nonexistent", path=str(tmp_path / "nope.jsonl"))
