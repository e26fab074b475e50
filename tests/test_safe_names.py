"""Names from a shared tracking store never become paths outside the output folder, and the report writer never
removes a folder it did not make."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from src.common.errors import UserError
from src.common.safe_names import MAX_LENGTH, folder_name
from src.compare.__main__ import default_out_dir
from src.compare.report import REPORT_MARK, write
from src.compare.sections import Section
from src.compare.tables import Table

HOSTILE = [
    "../../x",
    "../",
    "/tmp/abs",
    "~",
    "~/x",
    "a\x00b",
    "x" * 1000,
    "ünïcødé/../..",
    ".",
    "..",
    "",
    " ",
    "con",
    "a/b\\c",
    ".hidden",
    "-rf",
]


def snapshot(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_names_map_to_one_plain_folder(tmp_path, name):
    safe = folder_name(name)
    assert safe and len(safe) <= MAX_LENGTH and "/" not in safe and "\\" not in safe and "\x00" not in safe
    assert not safe.startswith((".", "-", "~"))
    assert (tmp_path / safe).resolve().parent == tmp_path.resolve()


def test_different_names_never_share_a_folder():
    names = ["a/b", "a_b", "a b", "a\x00b", "../a_b"]
    assert len({folder_name(n) for n in names}) == len(names)


def report(tmp: Path) -> list[Section]:
    return [
        Section(
            title="t",
            tables=[Table(title="x", data=pd.DataFrame({"a": [1]}), text=pd.DataFrame({"a": ["1"]}), name="x")],
        )
    ]


def test_report_replaces_only_its_own_folder_and_refuses_any_other(tmp_path):
    mine = tmp_path / "reports" / "exp"
    write(report(tmp_path), mine, header=["h"], title="t")
    assert (mine / REPORT_MARK).is_file() and (mine / "tables" / "x.csv").is_file()
    (mine / "tables" / "stale.csv").write_text("old")
    write(report(tmp_path), mine, header=["h"], title="t")  # its own folder: replaced whole
    assert not (mine / "tables" / "stale.csv").exists() and (mine / "report.html").is_file()
    assert sorted(p.name for p in mine.parent.iterdir()) == ["exp"], "no temporary folder is left beside it"

    theirs = tmp_path / "theirs"
    (theirs / "tables").mkdir(parents=True)
    (theirs / "tables" / "precious.csv").write_text("keep")
    before = snapshot(theirs)
    with pytest.raises(UserError, match="--out"):
        write(report(tmp_path), theirs, header=["h"], title="t")
    assert snapshot(theirs) == before and (theirs / "tables" / "precious.csv").read_text() == "keep"


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_compare_report_of_any_experiment_name_stays_inside_reports(tmp_path, monkeypatch, name):
    """The folder `python -m src.compare --experiment NAME` writes, for hostile NAMEs: inside reports/, and
    writing it changes nothing outside it (a `tables/` folder where '../../x' would have led is untouched)."""
    work = tmp_path / "work"
    (tmp_path / "x" / "tables").mkdir(parents=True)
    (tmp_path / "x" / "tables" / "precious.csv").write_text("keep")
    work.mkdir()
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    out = default_out_dir(name)
    assert out.resolve().parent == (work / "reports").resolve()
    write(report(tmp_path), out, header=["h"], title=name.replace("\x00", ""))

    def outside(files):
        return {k: v for k, v in files.items() if k != "work" and not k.startswith("work/reports")}

    assert outside(snapshot(tmp_path)) == outside(before)
    assert (out / "report.html").is_file()


def test_a_failed_swap_leaves_the_previous_report_in_place(tmp_path, monkeypatch):
    mine = tmp_path / "reports" / "exp"
    write(report(tmp_path), mine, header=["h"], title="first")
    before = (mine / "report.html").read_text()
    real_replace = os.replace

    def failing(src, dst):
        if Path(dst) == mine and Path(src).name.startswith(".exp.new-"):  # the new report cannot be moved in
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr("src.common.owners.os.replace", failing)
    with pytest.raises(OSError):
        write(report(tmp_path), mine, header=["h"], title="second")
    assert (mine / "report.html").read_text() == before
    assert sorted(p.name for p in mine.parent.iterdir()) == ["exp"], "no temporary folder is left beside it"


@pytest.mark.slow  # a job, an ingest, a sync and a comparison report per name, in-process
def test_hostile_experiment_names_change_nothing_outside_the_output_folder(tmp_path, monkeypatch, empty_mlflow_db):
    """Every entry point where a name from the config or the store becomes part of a path, driven with names aimed
    at the folders around the work folder (`..`, an absolute path, `~` with HOME beside it, NUL, unicode, very
    long): a job logged under that experiment (online and offline), `src.sync` of the offline run, `src.ingest` of
    exported prompts under that run name, and `src.compare --experiment NAME` with its default report folder.
    Nothing outside `work/` is created, changed or removed; inside it, only the stores, outputs and reports/."""
    import json
    import shutil

    from omegaconf import open_dict

    from src.compare.__main__ import main as compare_main
    from src.config.compose import compose_job
    from src.export import export
    from src.ingest.__main__ import main as ingest_main
    from src.job.runner import run_job
    from src.sync import sync

    from .conftest import DATA_DIR

    work, home = tmp_path / "work", tmp_path / "home"
    for decoy in (tmp_path / "x" / "tables", home / "reports", tmp_path / "reports"):
        decoy.mkdir(parents=True)
        (decoy / "precious.csv").write_text("keep")
    (work / "mlruns").mkdir(parents=True)
    shutil.copyfile(empty_mlflow_db, work / "mlruns" / "mlflow.db")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    uri = "sqlite:///mlruns/mlflow.db"
    names = ["../x", f"{tmp_path}/x", "~/reports", "a\x00b/../..ünï", "x" * 300]
    outside = lambda files: {k: v for k, v in files.items() if k != "work" and not k.startswith("work/")}  # noqa: E731
    before = snapshot(tmp_path)

    for num, name in enumerate(names):
        cfg = compose_job(
            [
                "model=simulated",
                "limit=2",
                f"data_dir={DATA_DIR}",
                "cache.path=cache.db",
                f"tracking.uri={uri}",
                "tracking.offline_dir=mlruns/offline",
            ]
        )
        with open_dict(cfg):
            cfg.tracking.experiment = name
        run_job(cfg, out_dir=work / "out" / str(num))
        cfg.tracking.offline = True
        cfg.resume = False
        run_job(cfg, out_dir=work / "out" / f"{num}-offline")
        sync(Path("mlruns/offline"))
        exported = work / "out" / f"{num}-export"
        export(cfg, exported)
        answers = work / "out" / f"{num}-answers.jsonl"
        rows = [json.loads(line) for line in (exported / "prompts.jsonl").read_text().splitlines()]
        choice = {"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}
        answers.write_text(
            "".join(
                json.dumps(
                    {"custom_id": r["custom_id"], "response": {"status_code": 200, "body": {"choices": [choice]}}}
                )
                + "\n"
                for r in rows
            )
        )
        assert (
            ingest_main(
                [
                    "--format",
                    "generic",
                    "--path",
                    str(exported / "prompts.jsonl"),
                    "--answers",
                    str(answers),
                    "--tracking-uri",
                    uri,
                    "--experiment",
                    name,
                    "--run-name",
                    name,
                ]
            )
            == 0
        )
        assert compare_main(["--experiment", name, "--tracking-uri", uri, "--no-paired"]) == 0
        assert (work / "reports" / folder_name(name) / "report.html").is_file()
        assert outside(snapshot(tmp_path)) == outside(before), f"experiment name {name!r} reached outside work/"

    assert sorted(p.name for p in (work / "reports").iterdir()) == sorted(folder_name(n) for n in names)
    assert {p.name for p in work.iterdir()} <= {"mlruns", "out", "reports", "cache.db", "cache.db-wal", "cache.db-shm"}
    assert (tmp_path / "x" / "tables" / "precious.csv").read_text() == "keep"
