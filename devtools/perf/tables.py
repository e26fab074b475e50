"""The docs' tables of measured figures, made from the bench's results file (devtools/perf/results.jsonl).

    python -m devtools.perf.tables --write     # rewrite every marked table from the results file
    python -m devtools.perf.tables --check     # exit 1 naming each page whose table differs from the file

A page holds each table between a BEGIN and an END line naming it (`<!-- perf-table speed: ... -->`, `<!-- end of
perf-table speed -->`); the prose around it says what a figure means, the table says what was measured, where, when,
at what load and by which command. Each row shows the latest record of its name (by date): a figure the bench
measures again replaces the one before it in the table, and the file keeps both. A record with `"recorded_from":
"docs"` is a figure the docs stated before they were made from the file, kept with the machine, date, load and
command the docs gave; the table marks it "(from the docs)". Bad input (no marker in a page, a results file that
is not JSON Lines) is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.perf import sizes
from devtools.perf.meter import REPO
from devtools.perf.results import DEFAULT_PATH

BEGIN = "<!-- perf-table {name}: made by `python -m devtools.perf.tables --write` from devtools/perf/results.jsonl -->"
END = "<!-- end of perf-table {name} -->"


class TableError(ValueError):
    """A page or results file the tables cannot be made from; its message says what to do."""


@dataclass(frozen=True)
class Row:
    """One figure of a table: what it is, the record names it shows, how their values read, its target."""

    label: str
    names: tuple[str, ...]
    form: str  # str.format over the records' values, in `names` order
    target: str = ""  # the target as meter.TARGETS words it; "met" / "not met" comes from the record
    kernels: str | None = None  # the ATEN_CPU_CAPABILITY its records ran under (None: torch's own choice)

    def matches(self, record: dict[str, Any]) -> bool:
        return record.get("machine", {}).get("aten_cpu_capability") == self.kernels


def load(path: Path) -> list[dict[str, Any]]:
    """Every record of the results file, in file order ([] where there is none)."""
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise TableError(f"{path}:{number} is not a JSON object ({err.msg}): fix or remove the line") from err
    return out


def latest(records: list[dict[str, Any]], name: str, where: Callable[[dict[str, Any]], bool] = lambda r: True):
    """The record of `name` with the latest date (the last in the file among equal dates), or None."""
    found = [r for r in records if r.get("name") == name and where(r)]
    return max(reversed(found), key=lambda r: str(r.get("date", "")), default=None)


def machine_words(record: dict[str, Any]) -> str:
    """The machine in a few words: as the docs stated it, else the CPU model, its instruction sets and cores.

    >>> machine_words({"machine": {"cpu": "AMD EPYC 9B14", "cpus": 2, "cpu_flags": ["avx2", "avx512f"]}})
    'AMD EPYC 9B14 (AVX-512), 2 CPUs'
    >>> machine_words({"machine": {"cpu": "X", "cpus": 2, "cpu_flags": ["avx2"], "aten_cpu_capability": "avx2"}})
    'X (AVX2), 2 CPUs, ATEN_CPU_CAPABILITY=avx2'
    """
    m = record.get("machine", {})
    if "as_stated" in m:
        return str(m["as_stated"])
    flags = set(m.get("cpu_flags", []))
    sets = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""]
    sets += ["AVX-512 BF16"] if "avx512_bf16" in flags else []
    sets += ["AMX"] if "amx_bf16" in flags else []
    words = f"{m.get('cpu', '?')} ({', '.join(s for s in sets if s)}), {m.get('cpus', '?')} CPUs"
    if "aten_cpu_capability" in m:
        words += f", ATEN_CPU_CAPABILITY={m['aten_cpu_capability']}"
    if "gpu" in m:
        words += f", {m['gpu']}"
    return words


def when(record: dict[str, Any]) -> str:
    """Date (UTC, to the day), load average and where the figure came from."""
    date = str(record.get("date") or record.get("date_as_stated") or "?")[:10]
    if record.get("date_as_stated") and not record.get("date"):
        date = str(record["date_as_stated"])
    text = f"{date}, load {record.get('load_average', '?')}"
    if record.get("recorded_from") == "docs":
        text += f" (from the docs, commit {record.get('commit', '?')})"
    return text


def command_words(record: dict[str, Any]) -> str:
    """The record's command without where the bench wrote its output (`--results`, `--out`): what measured it.

    >>> command_words({"command": "python -m devtools.perf --only cora --results /tmp/r.jsonl --out b.json"})
    'python -m devtools.perf --only cora'
    """
    words = shlex.split(str(record.get("command", "?")))
    kept = [w for i, w in enumerate(words) if w not in OUTPUT_FLAGS and (i == 0 or words[i - 1] not in OUTPUT_FLAGS)]
    return shlex.join(kept)


OUTPUT_FLAGS = ("--results", "--out", "--sizes-dir")  # where the bench wrote, not what it measured


def target_words(row: Row, record: dict[str, Any]) -> str:
    if not row.target:
        return ""
    if "target_met" not in record:
        return row.target
    return f"{row.target}: {'met' if record['target_met'] else 'not met'}"


def render_rows(records: list[dict[str, Any]], rows: tuple[Row, ...]) -> list[str]:
    """The figures table: one line per row, its value from the latest record of each of its names."""
    lines = ["| figure | value | target | machine | date, load | command |", "|---|---|---|---|---|---|"]
    for row in rows:
        found = [latest(records, name, row.matches) for name in row.names]
        first = found[0]
        if first is None or any(r is None for r in found):
            lines.append(f"| {row.label} | not measured | {row.target} | | | |")
            continue
        value = row.form.format(*(r["value"] for r in found if r is not None))
        lines.append(
            f"| {row.label} | {value} | {target_words(row, first)} | {machine_words(first)} | {when(first)} | "
            f"`{command_words(first)}` |"
        )
    return lines


# README's main job timed whole (devtools/perf/processes.py part_main_job): its phase's seconds, which the bench
# records also when it is stopped during the first run that follows
MAIN_JOB = "main_job (models cache warm): seconds"
MAIN_JOB_CPU = "main_job (models cache warm): cpu_s"  # the process's CPU seconds: the wall's share of a busy machine

# docs/speed.md's table of the current figures, in its order
SPEED_ROWS = (
    Row("the main job, whole command (README)", (MAIN_JOB,), "{0:.0f} s"),
    Row("the main job's answering phase, 2,294 prompts", ("mainjob_answering_seconds",), "{0:.1f} s"),
    Row(
        "main job: model FLOP/s / a float matmul's rate (`mainjob_share_of_matmul_rate`)",
        ("mainjob_share_of_matmul_rate",),
        "{0:.3f}",
        ">= 0.8",
    ),
    Row(
        "the same share if only the matrix products and SDPA took time (`mainjob_share_ceiling`)",
        ("mainjob_share_ceiling",),
        "{0:.3f}",
        "none: the bound",
    ),
    Row(
        "main job, token budgets / one pack per pass (`mainjob_token_vs_fixed_batches`)",
        ("mainjob_token_vs_fixed_batches",),
        "{0:.3f}",
        "<= 1.02",
    ),
    Row(
        "CoRA label scoring: padded batches of 16 / packed (`cora_vs_padded`), tokens fed "
        "(`cora_padded_vs_optimised_tokens`)",
        ("cora_vs_padded", "cora_padded_vs_optimised_tokens"),
        "{0:.2f}x ({1:.1f}x fewer tokens)",
        ">= 3x",
    ),
    Row(
        "CoRA: a packed token / a padded one (`cora_optimised_vs_padded_ms_per_token`)",
        ("cora_optimised_vs_padded_ms_per_token",),
        "{0:.3g}",
        "<= 1.2",
    ),
    Row(
        "the same two with torch's AVX2 kernels, as AVX2-only CPUs run them",
        ("cora_vs_padded", "cora_optimised_vs_padded_ms_per_token"),
        "CoRA {0:.2f}x padded, a packed token {1:.3g}",
        ">= 3x, <= 1.2",
        kernels="avx2",
    ),
    Row(
        "`generate` R = 10, T = 0.7 / label scoring (`gen_r10_vs_labels`)",
        ("gen_r10_vs_labels", "gen_r10_vs_labels_cpu"),
        "{0:.2f}x (CPU time {1:.2f}x)",
        "<= 2.5x",
    ),
    Row(
        "`generate` greedy R = 1 / label scoring (`gen_greedy_vs_labels`)",
        ("gen_greedy_vs_labels",),
        "{0:.2f}x",
        "<= 1.5x",
    ),
    Row(
        "peak RSS, `generate` R = 10 / R = 1 (`gen_r10_vs_r1_peak_rss`; padded: `gen_r10_vs_r1_padded_peak_rss`)",
        ("gen_r10_vs_r1_peak_rss", "gen_r10_vs_r1_padded_peak_rss"),
        "{0:.2f}x (padded: {1:.2f}x)",
        "<= 1.2x",
    ),
    Row(
        "prefix-shared samples = padded batches' (`gen_shared_same_samples`, 1 = identical)",
        ("gen_shared_same_samples",),
        "{0:g}",
        "identical",
    ),
    Row(
        "GGUF load, fresh process, empty models cache / cached (`load_cold_vs_warm`)",
        ("load_cold_vs_warm",),
        "{0:.1f}x",
        ">= 3x",
    ),
    Row(
        "rerun of a finished `python -m src.run` / its first run (`rerun_vs_first`)",
        ("rerun_vs_first",),
        "{0:.2f}",
        "< 10% (below)",
    ),
    Row(
        "one-question simulated job, fresh process (`startup_run_wall_s`)",
        ("startup_run_wall_s",),
        "{0:.2f} s",
        "<= 3 s",
    ),
    Row(
        "24-job simulated sweep under joblib / its summed compute (`startup_sweep_vs_compute`)",
        ("startup_sweep_vs_compute",),
        "{0:.2f}x",
        "< 2x",
    ),
    Row(
        "bfloat16 vs float32, share of the same decisions (`bf16_same_decisions`: the lower of CoRA label scoring's "
        "and the main job's)",
        ("bf16_same_decisions", "bf16_same_decisions_cora", "bf16_same_decisions_mainjob"),
        "{0:.2f} (CoRA {1:.2f}, main job {2:.3f})",
        "every prompt",
    ),
    Row(
        "label log-probabilities against lm-eval's: max abs difference (`agreement_max_abs`), same ranking "
        "(`agreement_ranking`)",
        ("agreement_max_abs", "agreement_ranking"),
        "{0:.2g}, the same ranking on {1:.0%} of questions",
        "<= 1e-4, all",
    ),
    Row(
        "lm-eval's `HFLM.loglikelihood` / ours on the same 100 CoRA prompts (`cora_vs_lmeval_scoring`)",
        ("cora_vs_lmeval_scoring",),
        "{0:.1f}x",
        "> 1",
    ),
    Row(
        "adaptive repetitions: share of samples saved (`adaptive_saved_share`), wall time against all 10 "
        "(`adaptive_vs_full_wall`)",
        ("adaptive_saved_share", "adaptive_vs_full_wall"),
        "{0:.1%}, {1:.1f}x",
        "same cells",
    ),
    Row(
        "MedQA CoRA with Llama-3-8B's shape on one H100 (`gpu_medqa_cora_8b_h100_s`)",
        ("gpu_medqa_cora_8b_h100_s",),
        "{0:.0f} s",
        "< 120 s",
    ),
)


def render_speed(records: list[dict[str, Any]]) -> list[str]:
    return render_rows(records, SPEED_ROWS)


def render_main_job(records: list[dict[str, Any]]) -> list[str]:
    """README's main job: the latest `main_job_s` of each machine and kernel choice, newest first, with what the
    first run (models cache empty) added on that machine the same day."""
    lines = [
        "| machine (instruction sets torch ran) | main job, models cache warm | first run adds | date, load | how |",
        "|---|---|---|---|---|",
    ]
    newest: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("name") == MAIN_JOB:
            key = machine_words(record)
            if key not in newest or str(record.get("date", "")) >= str(newest[key].get("date", "")):
                newest[key] = record
    for key, record in sorted(newest.items(), key=lambda kv: str(kv[1].get("date", "")), reverse=True):
        extras = [
            r["value"]
            for r in records
            if r.get("name") == "main_job_first_run_extra_s"
            and machine_words(r) == key
            and str(r.get("date", ""))[:10] == str(record.get("date", ""))[:10]  # the same day's bench run
        ]
        extra = f"{extras[-1]:.0f} s" if extras else ""
        cpu = [r["value"] for r in records if r.get("name") == MAIN_JOB_CPU and r.get("date") == record.get("date")]
        wall = f"{record['value']:.0f} s" + (f" ({cpu[-1]:.0f} s CPU)" if cpu else "")
        note = f" ({record['note']})" if record.get("note") else ""
        lines.append(f"| {key} | {wall} | {extra} | {when(record)} | `{command_words(record)}`{note} |")
    return lines


def render_sizes(records: list[dict[str, Any]]) -> list[str]:
    """docs/speed.md's report sizes (devtools/perf/sizes.py): each figure of `sizes.FIGURES` as last measured."""
    rows = tuple(
        Row(label, (name,), "{0:,.0f}" if name.endswith(("_questions", "_copies")) else "{0:.3g} MB")
        for name, label in sizes.FIGURES
    )
    return render_rows(records, rows)


# each table: the page it is on and how it is made
TABLES: dict[str, tuple[str, Callable[[list[dict[str, Any]]], list[str]]]] = {
    "main-job": ("README.md", render_main_job),
    "speed": ("docs/speed.md", render_speed),
    "sizes": ("docs/speed.md", render_sizes),
}


def block(name: str, records: list[dict[str, Any]]) -> str:
    """The table `name` with its markers."""
    _, render = TABLES[name]
    return "\n".join([BEGIN.format(name=name), *render(records), END.format(name=name)])


def page_with(text: str, name: str, records: list[dict[str, Any]]) -> str:
    """`text` with table `name` made anew from `records`, every other line as it was."""
    lines = text.split("\n")
    begin, end = BEGIN.format(name=name), END.format(name=name)
    if begin not in lines or end not in lines or lines.index(end) < lines.index(begin):
        raise TableError(
            f"{TABLES[name][0]} has no perf-table {name}: put the lines {begin!r} and {end!r} where it goes"
        )
    start, stop = lines.index(begin), lines.index(end)
    return "\n".join([*lines[:start], block(name, records), *lines[stop + 1 :]])


def stale(records: list[dict[str, Any]], root: Path | None = None) -> list[str]:
    """The pages (under `root`, the repository by default) whose tables differ from what `records` give."""
    root = root or REPO
    out = []
    for name, (page, _) in TABLES.items():
        text = (root / page).read_text(encoding="utf-8")
        if page_with(text, name, records) != text:
            out.append(f"{page} (perf-table {name})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.perf.tables", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite every marked table from the results file")
    action.add_argument("--check", action="store_true", help="exit 1 naming each page whose table is out of date")
    parser.add_argument("--results", metavar="PATH", default=str(DEFAULT_PATH), help="the results file (JSON Lines)")
    args = parser.parse_args(argv)
    try:
        records = load(Path(args.results))
        if args.check:
            pages = stale(records)
            for page in pages:
                print(f"{page} differs from {args.results}: run `python -m devtools.perf.tables --write`")
            return 1 if pages else 0
        for name, (page, _) in TABLES.items():
            path = REPO / page
            text = path.read_text(encoding="utf-8")
            new = page_with(text, name, records)
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"rewrote {page} (perf-table {name})")
    except TableError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
