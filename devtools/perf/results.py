"""The bench's history: every figure `python -m devtools.perf` prints, appended to a JSON Lines file.

One object per line and figure, with what makes it comparable to another line: the machine (CPU model, cores, the
instruction sets that change the numbers, the GPU where torch saw one), the date (UTC), the load average when the
figure was taken, the command, the git commit, and the figure's name, value and unit. The docs state each figure
once; this file keeps every one measured, so a later reader can see how a figure moved. The default file is
`devtools/perf/results.jsonl`; `--results PATH` or `MCQ_PERF_RESULTS` sends the lines elsewhere (the tests do).

>>> unit_of("gpu_job_prompts_per_s"), unit_of("review_scale_html_mb"), unit_of("cora_vs_padded")
('prompts/s', 'MB', 'ratio')
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from devtools.perf.meter import REPO

DEFAULT_PATH = REPO / "devtools" / "perf" / "results.jsonl"
PATH_ENV = "MCQ_PERF_RESULTS"

# the instruction sets that decide which kernels torch runs on a CPU (bf16 natively or emulated, AVX-512 or AVX2)
FLAGS_THAT_MATTER = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")

PHASE_UNITS = {
    "seconds": "s",
    "prompts": "prompts",
    "prompts_per_s": "prompts/s",
    "forward_tokens": "tokens",
    "ms_per_token": "ms/token",
    "peak_rss_mib": "MiB",
    "peak_rss_growth_mib": "MiB",
    "process_peak_rss_mib": "MiB",
}

SUFFIX_UNITS = (  # a ratio's unit from its name's ending, longest first; anything else is a plain ratio
    ("_prompts_per_s", "prompts/s"),
    ("_tokens_per_s", "tokens/s"),
    ("_per_s", "1/s"),
    ("_gib", "GiB"),
    ("_mib", "MiB"),
    ("_mb", "MB"),
    ("_tokens", "tokens"),
    ("_questions", "questions"),
    ("_s", "s"),
)


def unit_of(name: str) -> str:
    """The unit of a ratio or of a phase's measure, read from its name."""
    if name in PHASE_UNITS:
        return PHASE_UNITS[name]
    return next((unit for suffix, unit in SUFFIX_UNITS if name.endswith(suffix)), "ratio")


def results_path(given: str | None) -> Path:
    """The file to append to: `--results`, else `MCQ_PERF_RESULTS`, else the committed default."""
    return Path(given or os.environ.get(PATH_ENV) or DEFAULT_PATH)


def utc(epoch: float | None = None) -> str:
    """An ISO 8601 date and time, UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def machine() -> dict[str, Any]:
    """The CPU model, its cores and the flags of FLAGS_THAT_MATTER it has (from /proc/cpuinfo, else `platform`),
    `ATEN_CPU_CAPABILITY` where set, and the GPU where torch is already imported and sees one (importing torch here
    would cost the bench seconds)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the model from `platform`, no flags
        cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            model = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
    out: dict[str, Any] = {
        "cpu": model,
        "cpus": os.cpu_count(),
        "cpu_flags": [f for f in FLAGS_THAT_MATTER if f in flags],
        "platform": platform.platform(),
    }
    if os.environ.get("ATEN_CPU_CAPABILITY"):  # torch told to run other kernels than the CPU's best (avx2, ...)
        out["aten_cpu_capability"] = os.environ["ATEN_CPU_CAPABILITY"]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def commit() -> str:
    """The checkout's commit, `+dirty` when tracked files differ from it; "unknown" outside a git clone."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO, capture_output=True).returncode
    except OSError:  # no git on the machine
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty else "")


def records(
    argv: list[str],
    phases: dict[str, dict[str, float]],
    taken: dict[str, tuple[float, float]],
    ratios: dict[str, float],
    targets_met: dict[str, bool],
    measured_commit: str | None = None,
) -> Iterable[dict[str, Any]]:
    """One record per finite figure: each phase's measures at the date and load its phase ended (`taken`), then
    each ratio (with `target_met` where it has a target) at the date and load of now. `measured_commit` is the
    checkout's commit when the bench started (a commit made while it ran is not the code it measured)."""
    common = {
        "machine": machine(),
        "command": shlex.join(["python", "-m", "devtools.perf", *argv]),
        "commit": measured_commit or commit(),  # the code measured: read when the bench started, if given
    }
    for phase, measures in phases.items():
        ended, load = taken.get(phase, (time.time(), os.getloadavg()[0]))
        date = utc(ended)
        for measure, value in measures.items():
            name = f"{phase}: {measure}"
            yield from _record(common, date, load, name, value, unit_of(measure))
    date, load = utc(), os.getloadavg()[0]
    for name, value in ratios.items():
        for out in _record(common, date, load, name, value, unit_of(name)):
            if name in targets_met:
                out["target_met"] = targets_met[name]
            yield out


def _record(common: dict[str, Any], date: str, load: float, name: str, value: Any, unit: str):
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return  # NaN (no tokens fed) and non-numbers are not figures; JSON has no NaN either
    yield {"date": date, "load_average": round(load, 2), **common, "name": name, "value": value, "unit": unit}


def append(path: Path, lines: Iterable[dict[str, Any]]) -> int:
    """Append `lines` to `path` (made, with its folder, when missing), one JSON object per line; how many."""
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.write(text)
    return text.count("\n")
