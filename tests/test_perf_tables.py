"""The docs' tables of measured figures (devtools/perf/tables.py) are made from the bench's results file and cannot
drift from it: README's main-job times and docs/speed.md's current figures."""

from __future__ import annotations

import json

import pytest

from devtools.perf import results, tables


def record(name, value, date, cpu="CPU A", flags=("avx2", "avx512f"), **extra):
    machine = {"cpu": cpu, "cpus": 2, "cpu_flags": list(flags)}
    machine.update(extra.pop("machine", {}))
    return {
        "name": name,
        "value": value,
        "unit": results.unit_of(name),
        "date": date,
        "load_average": 0.5,
        "command": "python -m devtools.perf --only main_job",
        "commit": "abc1234",
        "machine": machine,
        **extra,
    }


@pytest.mark.promise("README.md", "the main job's table of times is the one devtools/perf/results.jsonl gives")
@pytest.mark.promise("docs/speed.md", "the table of current figures is the one devtools/perf/results.jsonl gives")
def test_the_pages_tables_are_the_ones_the_committed_results_file_gives():
    committed = tables.load(results.DEFAULT_PATH)
    assert committed, "the committed results file holds the figures the docs' tables show"
    assert tables.stale(committed) == [], "a page's table differs: run `python -m devtools.perf.tables --write`"
    made = [tables.block(name, committed) for name in tables.TABLES]
    assert all("| " in block for block in made)


def test_a_row_shows_the_latest_record_of_its_names_and_says_not_measured_without_one():
    row = tables.Row(
        "CoRA vs padded", ("cora_vs_padded", "cora_padded_vs_optimised_tokens"), "{0:.2f}x ({1:.1f}x)", ">= 3x"
    )
    older = record("cora_vs_padded", 3.1, "2026-01-01T00:00:00Z", target_met=True)
    newer = record("cora_vs_padded", 2.5, "2026-02-01T00:00:00Z", target_met=False)
    tokens = record("cora_padded_vs_optimised_tokens", 4.0, "2026-02-01T00:00:00Z")
    avx2 = record("cora_vs_padded", 9.9, "2026-03-01T00:00:00Z", machine={"aten_cpu_capability": "avx2"})
    lines = tables.render_rows([newer, older, tokens, avx2], (row,))
    assert lines[2] == (
        "| CoRA vs padded | 2.50x (4.0x) | >= 3x: not met | CPU A (AVX-512), 2 CPUs | 2026-02-01, load 0.5 | "
        "`python -m devtools.perf --only main_job` |"
    ), "the newest record, not the first in the file nor one made under other kernels"
    assert tables.render_rows([older], (row,))[2] == "| CoRA vs padded | not measured | >= 3x | | | |"


def test_the_main_job_table_has_the_latest_time_of_each_machine_and_marks_figures_from_the_docs():
    rows = [
        record(tables.MAIN_JOB, 80.0, "2026-01-01T00:00:00Z"),
        record(tables.MAIN_JOB, 70.4, "2026-02-01T00:00:00Z"),
        record("main_job_first_run_extra_s", 31.2, "2026-02-01T00:00:00Z"),
        record(tables.MAIN_JOB, 95.0, "2026-01-15T00:00:00Z", machine={"aten_cpu_capability": "avx2"}),
        record(
            tables.MAIN_JOB,
            106,
            "2026-01-10",
            cpu="AMD",
            flags=("avx2",),
            recorded_from="docs",
            machine={"as_stated": "AMD EPYC (AVX2 only)"},
        ),
    ]
    lines = tables.render_main_job(rows)[2:]
    assert [line.split(" | ")[:3] for line in lines] == [
        ["| CPU A (AVX-512), 2 CPUs", "70 s", "31 s"],
        ["| CPU A (AVX-512), 2 CPUs, ATEN_CPU_CAPABILITY=avx2", "95 s", ""],
        ["| AMD EPYC (AVX2 only)", "106 s", ""],
    ], "one row per machine and kernel choice, newest first"
    assert "(from the docs, commit abc1234)" in lines[2] and "from the docs" not in lines[0]


def test_write_rewrites_only_between_the_markers_and_check_then_passes(tmp_path, monkeypatch):
    page = tmp_path / "README.md"
    begin, end = (marker.format(name="main-job") for marker in (tables.BEGIN, tables.END))
    page.write_text(f"# Title\n\nbefore\n\n{begin}\nold row\n{end}\n\nafter\n", encoding="utf-8")
    file = tmp_path / "results.jsonl"
    file.write_text(json.dumps(record(tables.MAIN_JOB, 70.4, "2026-02-01T00:00:00Z")) + "\n", encoding="utf-8")
    monkeypatch.setattr(tables, "REPO", tmp_path)
    monkeypatch.setattr(tables, "TABLES", {"main-job": ("README.md", tables.render_main_job)})
    assert tables.main(["--check", "--results", str(file)]) == 1
    assert tables.main(["--write", "--results", str(file)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# Title\n\nbefore\n\n{begin}\n") and text.endswith(f"{end}\n\nafter\n")
    assert "old row" not in text and "| 70 s |" in text
    assert tables.main(["--check", "--results", str(file)]) == 0


def test_a_page_without_markers_or_a_broken_results_file_is_one_error_line_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "README.md").write_text("# no table here\n", encoding="utf-8")
    monkeypatch.setattr(tables, "REPO", tmp_path)
    monkeypatch.setattr(tables, "TABLES", {"main-job": ("README.md", tables.render_main_job)})
    assert tables.main(["--write", "--results", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: README.md has no perf-table main-job: put the lines") and "\n" not in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"name": "x"}\nnot json\n', encoding="utf-8")
    assert tables.main(["--check", "--results", str(broken)]) == 2
    assert f"{broken}:2 is not a JSON object" in capsys.readouterr().err
