"""The report's folder: report.md, report.html (self-contained), tables/*.csv (the per-question tables of prompts
and outputs as tables/*.parquet) and plots/*.png written whole, its `About this report` lines, and the MLflow run
tagged `kind=comparison` that holds the folder as artifacts."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from src.common import owners
from src.common.errors import UserError
from src.common.safe_names import folder_name
from src.tracking import reads

from .load import Runs
from .render import render
from .sections import Section

COMPARISON_TAG = ("kind", "comparison")
REPORT_MARK = ".mcq-report"  # in every folder `write` made: only such a folder is ever replaced


def write(sections: list[Section], out_dir: Path, *, header: list[str], title: str) -> list[Path]:
    """Write report.md, report.html, tables/*.csv, tables/*.parquet and plots/*.png as the folder out_dir; returns
    the files written.

    The report is written into a fresh sibling folder and swapped in by renames (`owners.replace_folder_whole`), so
    an interrupted write leaves the previous report whole. An existing out_dir is replaced only when empty or made
    by this function (it holds REPORT_MARK); any other folder is refused with a UserError naming --out, and nothing
    in it is touched."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not (
        out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / REPORT_MARK).is_file())
    ):
        raise UserError(
            f"--out {out_dir}: exists and is not a report folder written by python -m src.compare; "
            f"give a new or empty folder"
        )

    def fill(folder: Path) -> list[Path]:
        files = _write_files(sections, folder, header=header, title=title)
        (folder / REPORT_MARK).write_text("written by python -m src.compare; replaced whole on the next report\n")
        return [path.relative_to(folder) for path in files]

    return [out_dir / path for path in owners.replace_folder_whole(out_dir, fill)]


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
            path = folder / "tables" / f"{folder_name(table.name)}{table.suffix}"
            if table.columnar:  # zstd level 9: a third smaller than its default level, still well under a second
                clean_floats(table.data).to_parquet(path, index=False, compression="zstd", compression_level=9)
            else:
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
    out_dir: Path,
    *,
    tracking_uri: str,
    experiment_id: str,
    name: str,
    tags: Mapping[str, str],
    params: Mapping[str, object],
) -> str:
    """A run tagged kind=comparison holding the report folder as artifacts; returns its id."""
    return reads.log_folder_run(
        out_dir,
        tracking_uri=tracking_uri,
        experiment_id=experiment_id,
        name=name,
        tags={**dict([COMPARISON_TAG]), **tags},
        params=params,
    )


def header_lines(runs: Runs | None, *, filters: Mapping[str, str]) -> list[str]:
    """The `About this report` lines: when and by what, from which store, experiments, sweeps, models, benchmarks
    and filters."""
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
