"""Benchmarks from the Hugging Face Hub (src/benchmarks/hub.py), tested without a network.

The Hub step is read through a folder laid out as the Hub publishes its parquet files
(`<repo>/<config>/<split>-00000-of-00001.parquet`), written here from rows built out of the raw
fixture files in ../shared/data, so the same conversion code runs as on a real download; nothing
is downloaded. An empty data_dir offline gives the one-line error naming the dataset and the fetch
command.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from src.benchmarks import BENCHMARKS, hub, hub_access, load_benchmark
from src.common.errors import UserError
from src.core.questions import benchmark_identity
from src.data import main as data_main

from .conftest import DATA_DIR, needs_data


@pytest.fixture
def offline_env(monkeypatch, tmp_path):
    """Offline, no snapshot folder, an empty `datasets` cache of its own."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv(hub_access.HUB_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_empty_data_dir_offline_is_one_line_naming_dataset_and_fetch(offline_env):
    with pytest.raises(UserError) as info:
        load_benchmark("mmlu", path=None, data_dir=str(offline_env))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"benchmark mmlu: files absent under {offline_env}")
    assert "the Hub dataset cais/mmlu (all, test) is not in the cache and cannot be downloaded (offline)" in message
    assert f"run python -m src.data fetch mmlu --to {offline_env} on a machine with network" in message
    assert info.value.exit_code == 2


def test_slots_on_empty_data_dir_offline_exits_2(offline_env, capsys):
    assert data_main(["slots", "arc_challenge", "--data-dir", str(offline_env)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "allenai/ai2_arc (ARC-Challenge, test)" in err[0]
    assert "python -m src.data fetch arc_challenge --to" in err[0]


def test_fetch_offline_exits_2_with_one_line(offline_env, tmp_path, capsys):
    assert data_main(["fetch", "winogrande", "--to", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "allenai/winogrande (winogrande_xl, validation)" in err[0] and "(offline)" in err[0]


def test_options_checked_before_any_download(offline_env):
    with pytest.raises(UserError, match="benchmark.shuffle"):
        load_benchmark("truthfulqa_mc2", path=None, data_dir=str(offline_env), options={"shuffle": "yes"})
    with pytest.raises(UserError, match="has only version v1"):
        load_benchmark("truthfulqa_mc1", path=None, data_dir=str(offline_env), options={"version": "2025"})


def test_list_names_every_benchmark(tmp_path, capsys):
    assert data_main(["list", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert set(rows) == set(BENCHMARKS)
    assert (
        "cais/mmlu" in rows["mmlu"] and "MIT" in rows["mmlu"] and "14042" in rows["mmlu"] and "absent" in rows["mmlu"]
    )
    assert "local raw only" in rows["medqa"]


def test_every_hub_source_has_pinned_local_files():
    for name, source in hub.HUB.items():
        assert name in BENCHMARKS and name in hub.LOCAL, name
        assert source.revision and source.splits and source.n_questions > 0, name


# --- the Hub layout, built from the raw fixture files ----------------------------------------------------------


def _write_parquet(root: Path, repo: str, layout: str, split: str, rows: list[dict]) -> None:
    import pandas as pd

    folder = root / repo / layout
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(folder / f"{split}-00000-of-00001.parquet", index=False)


def _mmlu_rows() -> list[dict]:
    rows = []
    for file in sorted((DATA_DIR / "mmlu" / "test").glob("*_test.csv")):
        subject = file.stem.removesuffix("_test")
        with file.open(encoding="utf-8", newline="") as handle:
            for cells in csv.reader(handle):
                rows.append(
                    {
                        "question": cells[0],
                        "subject": subject,
                        "choices": cells[1:5],
                        "answer": "ABCD".index(cells[5].strip()),
                    }
                )
    return rows


def _arc_rows() -> list[dict]:
    rows = []
    for line in (DATA_DIR / "arc_challenge" / "ARC-Challenge-Test.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        choices = record["question"]["choices"]
        rows.append(
            {
                "id": record["id"],
                "question": record["question"]["stem"],
                "choices": {"text": [c["text"] for c in choices], "label": [c["label"] for c in choices]},
                "answerKey": record["answerKey"],
            }
        )
    return rows


def _truthfulqa_rows() -> list[dict]:
    records = json.loads((DATA_DIR / "truthfulqa" / "v1" / "mc_task.json").read_text(encoding="utf-8"))
    return [
        {
            "question": r["question"],
            **{
                f"{t}_targets": {"choices": list(r[f"{t}_targets"]), "labels": list(r[f"{t}_targets"].values())}
                for t in ("mc1", "mc2")
            },
        }
        for r in records
    ]


def _same(hub_questions, raw_questions, *, subject: bool = True) -> None:
    assert len(hub_questions) == len(raw_questions)
    for h, r in zip(hub_questions, raw_questions):
        assert (h.id, h.question, h.options, h.answer, h.split) == (r.id, r.question, r.options, r.answer, r.split)
        if subject:
            assert h.subject == r.subject


def _jsonl(relative: str) -> list[dict]:
    return [json.loads(line) for line in (DATA_DIR / relative).read_text(encoding="utf-8").splitlines() if line]


def _redux_rows(file: Path) -> list[dict]:
    """An MMLU-Redux CSV (its own column order and delimiter) as mmlu-redux-2.0's rows: choices a list, answer an
    int."""
    import ast

    with file.open(encoding="utf-8", errors="replace", newline="") as handle:
        header = handle.readline()
        handle.seek(0)
        delimiter = ";" if header.count(";") > header.count(",") else ","
        records = [{k.strip(): v for k, v in r.items() if k} for r in csv.DictReader(handle, delimiter=delimiter)]
    return [
        {
            **{k: v for k, v in r.items() if k not in ("choices", "answer")},
            "choices": list(ast.literal_eval(r["choices"].strip())),
            "answer": int(r["answer"]),
        }
        for r in records
    ]


def _labelled_rows(relative: str, *fields: str) -> list[dict]:
    """AI2's records ({id, question: {stem, choices: [...]}, answerKey}) as the Hub's ARC / CommonsenseQA rows."""
    return [
        {
            "id": r["id"],
            "question": r["question"]["stem"],
            "choices": {
                "text": [c["text"] for c in r["question"]["choices"]],
                "label": [c["label"] for c in r["question"]["choices"]],
            },
            "answerKey": r["answerKey"],
            **{f: r["question"][f] for f in fields},
        }
        for r in _jsonl(relative)
    ]


def _hellaswag_rows() -> list[dict]:
    """The text file's items as Rowan/hellaswag's rows. The file joined ctx_a and ctx_b ("... on a roof. he"); an
    ActivityNet item's ctx_b is the lower-case start of a sentence after the context's last full stop, a WikiHow
    item's is empty, so the split is made here from that (written apart from the reader's own rule)."""
    import bz2

    lines = bz2.decompress((DATA_DIR / "hellaswag" / "hellaswag_val_full.txt.bz2").read_bytes()).decode().split("\n")
    rows = []
    for start in range(0, len(lines) - len(lines) % 6, 6):
        first, gold, *endings = lines[start : start + 6]
        label, _, ctx = first.partition(": ")
        head, dot, tail = ctx.rpartition(". ")
        split = dot and tail[:1].islower() and not tail.rstrip().endswith((".", "?", "!"))
        ctx_a, ctx_b = (head + ".", tail) if split else (ctx, "")
        rows.append({"activity_label": label, "ctx_a": ctx_a, "ctx_b": ctx_b, "endings": endings, "label": gold})
    return rows


@pytest.fixture(scope="module")
def hub_snapshot(tmp_path_factory) -> Path:
    """A folder laid out as the Hub's parquet files of every benchmark that has a Hub source, their rows made from
    the raw files in ../shared/data."""
    root = tmp_path_factory.mktemp("hub-snapshot")
    _write_parquet(root, "cais/mmlu", "all", "test", _mmlu_rows())
    _write_parquet(root, "allenai/ai2_arc", "ARC-Challenge", "test", _arc_rows())
    _write_parquet(root, "truthfulqa/truthful_qa", "multiple_choice", "validation", _truthfulqa_rows())
    for file in sorted((DATA_DIR / "mmlu_redux").glob("mmlu_*.csv")):
        _write_parquet(
            root, "edinburgh-dawg/mmlu-redux-2.0", file.stem.removeprefix("mmlu_"), "test", _redux_rows(file)
        )
    _write_parquet(root, "allenai/ai2_arc", "ARC-Easy", "test", _labelled_rows("arc_easy/ARC-Easy-Test.jsonl"))
    medqa = [{k: r[k] for k in ("question", "answer", "options", "meta_info", "answer_idx")} for r in
             _jsonl("medqa/4_options/phrases_no_exclude_test.jsonl")]  # fmt: skip
    _write_parquet(root, "GBaker/MedQA-USMLE-4-options", "data", "test", medqa)
    medmcqa = [
        {"question": r["question"], **{k: c[3:] for k, c in zip(("opa", "opb", "opc", "opd"), r["choices"])},
         "cop": r["answer"]}
        for r in _jsonl("medmcqa/validation.jsonl")
    ]  # fmt: skip
    _write_parquet(root, "openlifescienceai/medmcqa", "data", "validation", medmcqa)
    commonsenseqa = _labelled_rows("commonsenseqa/dev_rand_split.jsonl", "question_concept")
    _write_parquet(root, "tau/commonsense_qa", "data", "validation", commonsenseqa)
    _write_parquet(root, "Rowan/hellaswag", "data", "validation", _hellaswag_rows())
    winogrande = [
        {k: r[k] for k in ("sentence", "option1", "option2", "answer")} for r in _jsonl("winogrande/dev.jsonl")
    ]
    _write_parquet(root, "allenai/winogrande", "winogrande_xl", "validation", winogrande)
    return root


# Every benchmark with a Hub source, and what of a question only its files hold (so the identity differs by it).
PARITY = {name: () for name in hub.HUB} | {"truthfulqa_mc1": ("subject", "type"), "truthfulqa_mc2": ("subject", "type")}


@needs_data
@pytest.mark.promise(
    "docs/configuration.md",
    "a benchmark's questions have the same id, text, options and answer from its files and its Hub copy",
)
@pytest.mark.parametrize("name", sorted(PARITY))
def test_file_and_hub_give_the_same_questions(hub_snapshot, offline_env, monkeypatch, name):
    """The raw files and the Hub rows made of them give one question each (the same id, text, options, answer and
    split); where the rows hold all the files do, the same data identity too (the same cached answers)."""
    monkeypatch.setenv(hub_access.HUB_DIR_ENV, str(hub_snapshot))
    from_hub = load_benchmark(name, path=None, data_dir=str(offline_env), seed=3)
    from_file = load_benchmark(name, path=None, data_dir=str(DATA_DIR), seed=3)
    assert [(q.id, q.question, q.options, q.answer, q.split) for q in from_hub] == [
        (q.id, q.question, q.options, q.answer, q.split) for q in from_file
    ]
    if not PARITY[name]:
        assert benchmark_identity(from_hub) == benchmark_identity(from_file)


@needs_data
def test_hub_layout_gives_the_raw_loaders_questions(hub_snapshot, offline_env, monkeypatch):
    """The subject option on the Hub's MMLU; TruthfulQA's mc2 sets (each benchmark's questions:
    `test_file_and_hub_give_the_same_questions`)."""
    monkeypatch.setenv(hub_access.HUB_DIR_ENV, str(hub_snapshot))
    anatomy = load_benchmark("mmlu", path=None, data_dir=str(offline_env), options={"subjects": ["anatomy"]}, limit=3)
    assert [q.id for q in anatomy] == ["mmlu/anatomy/test/0", "mmlu/anatomy/test/1", "mmlu/anatomy/test/2"]
    # TruthfulQA: the same options, shuffled the same way with the seed; the Hub config has no Category (subject)
    for name in ("truthfulqa_mc1", "truthfulqa_mc2"):
        from_hub = load_benchmark(name, path=None, data_dir=str(offline_env), seed=3)
        raw = load_benchmark(name, path=None, data_dir=str(DATA_DIR), seed=3)
        _same(from_hub, raw, subject=False)
        assert [q.metadata.get("correct_set") for q in from_hub] == [q.metadata.get("correct_set") for q in raw]


@needs_data
def test_hub_layout_under_data_dir_hub_is_found_and_raw_files_win(hub_snapshot, offline_env, monkeypatch, tmp_path):
    """`fetch --to DIR` writes DIR/hub/<repo>/...: data_dir=DIR then runs offline; raw files, when present, come
    first."""
    data_dir = tmp_path / "fetched"
    (data_dir / "hub" / "allenai").mkdir(parents=True)
    (data_dir / "hub" / "allenai" / "ai2_arc").symlink_to(hub_snapshot / "allenai" / "ai2_arc")
    arc = load_benchmark("arc_challenge", path=None, data_dir=str(data_dir), limit=5)
    assert [q.id for q in arc] == [
        q.id for q in load_benchmark("arc_challenge", path=None, data_dir=str(DATA_DIR), limit=5)
    ]
    (data_dir / "arc_challenge").mkdir()
    (data_dir / "arc_challenge" / "ARC-Challenge-Test.jsonl").write_text(
        (DATA_DIR / "arc_challenge" / "ARC-Challenge-Test.jsonl").read_text(encoding="utf-8").splitlines()[0] + "\n"
    )
    assert len(load_benchmark("arc_challenge", path=None, data_dir=str(data_dir))) == 1  # the raw file, not the Hub's


@needs_data
def test_check_and_list_on_the_fixture(capsys):
    assert data_main(["check", "--data-dir", str(DATA_DIR)]) == 0
    assert data_main(["list", "--data-dir", str(DATA_DIR)]) == 0
    out = capsys.readouterr().out
    assert "local raw" in out and "pinned" in out and "DIFFERS" not in out


@needs_data
def test_check_names_a_changed_file(tmp_path, capsys):
    assert data_main(["fetch", "winogrande", "--from-raw", "--data-dir", str(DATA_DIR), "--to", str(tmp_path)]) == 0
    assert data_main(["check", "--data-dir", str(tmp_path)]) == 0
    with (tmp_path / "winogrande" / "dev-labels.lst").open("a") as handle:
        handle.write("1\n")
    capsys.readouterr()
    assert data_main(["check", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: winogrande: the files under") and "pinned" in err[0]


def test_fetch_writes_the_hub_layout_that_data_dir_then_reads(offline_env, tmp_path, monkeypatch):
    """`fetch` with the download replaced by a small `datasets.Dataset`: the parquet lands in DIR/hub/<repo>/<config>/
    and `data_dir=DIR` then loads it offline through the snapshot reader (a real download is not tested here)."""
    import datasets

    rows = [
        {"sentence": f"Ann beat Bo so _ won {i}.", "option1": "Ann", "option2": "Bo", "answer": "1"} for i in range(3)
    ]
    monkeypatch.setattr(hub_access, "load_hub_dataset", lambda *a, **k: datasets.Dataset.from_list(rows))
    out = tmp_path / "fetched"
    assert data_main(["fetch", "winogrande", "--to", str(out)]) == 0
    assert (out / "hub" / "allenai" / "winogrande" / "winogrande_xl" / "validation-00000-of-00001.parquet").is_file()
    monkeypatch.undo()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    questions = load_benchmark("winogrande", path=None, data_dir=str(out))
    assert [(q.id, q.options, q.answer) for q in questions] == [(f"winogrande/{i}", ("Ann", "Bo"), 0) for i in range(3)]


FETCH_THEN_HANG = """
import sys, time
from src import data
from src.benchmarks import hub_access

class HalfWritten:  # the download's rows, killed halfway through writing the parquet file
    def __len__(self):
        return 1
    def to_parquet(self, path):
        with open(path, "wb") as handle:
            handle.write(b"PAR1 half-written rows")
        print(path, flush=True)
        time.sleep(120)

hub_access.load_hub_dataset = lambda *a, **k: HalfWritten()
data.fetch(["winogrande"], to=sys.argv[1])
"""


@pytest.mark.slow  # a subprocess killed with SIGKILL
def test_a_killed_fetch_leaves_no_file_taken_for_whole_and_the_rerun_cleans_its_temp(
    offline_env, tmp_path, monkeypatch
):
    """`fetch` killed (SIGKILL) while writing: no parquet file a run would read, only a temporary named after the
    dead process, which the next fetch removes (the owner rule of src/common/owners.py) before writing the whole
    file."""
    import os
    import signal
    import subprocess
    import sys

    import datasets

    from src.common import owners
    from src.data import fetch

    from .conftest import REPO

    out = tmp_path / "fetched"
    folder = out / "hub" / "allenai" / "winogrande" / "winogrande_xl"
    proc = subprocess.Popen(
        [sys.executable, "-c", FETCH_THEN_HANG, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        tmp = Path(proc.stdout.readline().strip())  # the fetch is writing its temporary file
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert tmp.parent == folder and tmp.is_file() and f"-{proc.pid}-" in tmp.name
    assert sorted(folder.glob("validation-*.parquet")) == [], "nothing half-written looks like a whole file"
    assert hub_access.snapshot_files(hub.HUB["winogrande"], "winogrande_xl", "validation", out) == []

    rows = [{"sentence": "Ann beat Bo so _ won.", "option1": "Ann", "option2": "Bo", "answer": "1"}]
    monkeypatch.setattr(hub_access, "load_hub_dataset", lambda *a, **k: datasets.Dataset.from_list(rows))
    fetch(["winogrande"], to=str(out))  # the rerun
    assert sorted(p.name for p in folder.iterdir()) == ["validation-00000-of-00001.parquet"], "no temporary remains"
    assert not any(owners.TEMP_NAME.match(p.name) for p in out.rglob("*"))
    assert (
        hub_access._read_parquet(hub_access.snapshot_files(hub.HUB["winogrande"], "winogrande_xl", "validation", out))
        == rows
    )
    assert os.path.getsize(folder / "validation-00000-of-00001.parquet") > len(b"PAR1 half-written rows")


def test_a_failed_fetch_write_leaves_neither_file_nor_temporary(tmp_path):
    import os

    from src.data import write_whole

    target = tmp_path / "hub" / "x" / "test-00000-of-00001.parquet"

    def fails(tmp):
        tmp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_whole(target, fails)
    assert list(target.parent.iterdir()) == []
    theirs = target.parent / ".notes.tmp-backup"  # a user's file that only looks like an ownerless temporary
    theirs.write_text("keep")
    os.utime(theirs, (0, 0))
    write_whole(target, lambda tmp: tmp.write_bytes(b"whole"))
    assert sorted(p.name for p in target.parent.iterdir()) == [theirs.name, target.name]
    assert target.read_bytes() == b"whole" and theirs.read_text() == "keep"


def test_an_interrupted_datasets_build_is_not_listed_as_cached(tmp_path, monkeypatch):
    """`datasets` builds into `<hash>.incomplete/` and renames it when whole: a killed build is not a cached copy."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    source = hub.HUB["winogrande"]
    build = tmp_path / "allenai___winogrande" / "winogrande_xl" / "0.0.0" / "abc123"
    half = build.with_name("abc123.incomplete")
    half.mkdir(parents=True)
    (half / "dataset_info.json").write_text("{}")
    assert not hub_access.in_datasets_cache(source)
    build.mkdir()
    (build / "dataset_info.json").write_text("{}")
    assert hub_access.in_datasets_cache(source)
