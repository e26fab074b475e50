"""`python -m src.data slots BENCHMARK [--data-dir DIR] [--limit N] [--seed S]`: where the right answers sit.

Also `list` (every benchmark: source, licence, questions, present or not, checksum), `fetch NAME... --to DIR`
(an offline `data_dir`: the Hub dataset written as the Hub's parquet layout under DIR/hub, or with `--from-raw`
the raw files copied from `--data-dir`; each file written under a temporary name beside it and renamed when
whole, so a killed fetch leaves nothing a run would read, and the next fetch removes what it left) and `check`
(the raw files present against their pinned sha256s; one line per problem, exit 2). Where each benchmark is published:
`src/benchmarks/hub.py`.

(Also `--split` and `--path`, as `benchmark.split` / `benchmark.path`: `slots generic --path FILE`.)

Loads the benchmark as a run would (its loader's defaults, e.g. TruthfulQA shuffled with the
seed), prints per answer slot the count, the share and the share a uniformly random order would
give (the mean of 1/n_options over the questions that have the slot), then the one-line summary
runs log, and a `warning:` line when one slot holds more than half of the answers among at least
20 questions, beyond chance (the rule in `src/benchmarks/position.py`). Bad input: one line `error: ...`, exit code 2.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from src.cli import entry, user_error
from src.common import owners
from src.common.digests import file_sha256
from src.common.errors import UserError

from .benchmarks import BENCHMARKS, hub, hub_access, load_benchmark
from .benchmarks.position import (
    answer_slot_counts,
    answer_slot_warning,
    describe_answer_slots,
    expected_slot_shares,
    slot_name,
)

DEFAULT_DATA_DIR = os.environ.get("MCQ_DATA_DIR", "../shared/data")  # as conf/config.yaml's data_dir


def slots_report(
    name: str,
    *,
    data_dir: str,
    limit: int | None = None,
    seed: int = 0,
    split: str | None = None,
    path: str | None = None,
) -> str:
    """The `slots` command's output: a table of answer slots, the summary line and any warning."""
    questions = load_benchmark(name, path=path, data_dir=data_dir, split=split, seed=seed, limit=limit)
    counts = answer_slot_counts(questions)
    expected = expected_slot_shares(questions)
    n = len(questions)
    lines = [f"{name}: {n} questions, seed {seed}", f"{'slot':<5} {'count':>6} {'share':>7} {'random':>7}"]
    lines += [
        f"{slot_name(slot):<5} {count:>6} {count / n:>7.1%} {expected[slot]:>7.1%}" for slot, count in counts.items()
    ]
    lines.append(describe_answer_slots(questions))
    warning = answer_slot_warning(questions, name)
    if warning is not None:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def _presence(name: str, data_dir: str) -> tuple[str, str]:
    """(where the benchmark is present, its checksum): local raw files (their digest, pinned or not), a Hub
    snapshot or the `datasets` cache (the Hub revision), or absent."""
    local, source = hub.LOCAL.get(name), hub.HUB.get(name)
    if local is not None:
        files = local.files(data_dir)
        if files:
            digest = hub_access.local_digest(files, data_dir)
            state = "pinned" if digest == local.digest else "DIFFERS from pinned"
            count = "" if len(files) == local.n_files else f" ({len(files)} of {local.n_files} files)"
            return f"local raw{count}", f"sha256 {digest[:16]} {state}"
    if source is not None:
        revision = f"revision {source.revision}"
        default = next(iter(source.splits.values()))
        if any(hub_access.snapshot_files(source, config, default, data_dir) for config in source.configs()[:1]):
            return "hub snapshot", revision
        if hub_access.in_datasets_cache(source):
            return "hf cache", revision
        return "absent", revision
    return "absent", "-"


def list_report(data_dir: str) -> str:
    """The `list` command's table: every benchmark in `BENCHMARKS`."""
    rows = [("benchmark", "source", "licence", "questions", "present", "checksum")]
    for name in BENCHMARKS:
        source = hub.HUB.get(name)
        if name == "synthetic":
            rows.append((name, "built in", "built in", "100", "yes", "-"))
            continue
        if name == "generic":
            rows.append((name, "your file (benchmark.path)", "yours", "-", "-", "-"))
            continue
        if name == "lm_eval":
            rows.append((name, "an lm-eval task (benchmark.task), its YAML's data", "the task's", "-", "-", "-"))
            continue
        where = f"hub {source.describe()}" if source is not None else "local raw only"
        licence = source.licence if source is not None else hub.LOCAL_LICENCES.get(name, "-")
        count = source.n_questions if source is not None else hub.LOCAL_COUNTS.get(name, "-")
        present, checksum = _presence(name, data_dir)
        rows.append((name, where, licence, str(count), present, checksum))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    return "\n".join([f"data_dir {data_dir}", *lines])


def write_whole(target: Path, write: Callable[[Path], object]) -> None:
    """A fetched file written whole (`owners.write_whole`): a fetch killed halfway leaves no file that a reader (the
    snapshot glob `<split>-*.parquet`, `check`) takes for a whole one."""
    owners.write_whole(target, write, "an interrupted fetch")


def fetch(names: list[str], *, to: str, from_raw: bool = False, data_dir: str = DEFAULT_DATA_DIR) -> list[str]:
    """Prepare an offline data_dir `to`: each benchmark's Hub dataset as the Hub's parquet layout under `to/hub`,
    every split we read; with `from_raw` its raw files copied from `data_dir`. Returns what was written."""
    unpublished = ("synthetic", "generic", "lm_eval")  # made here, the user's file, an lm-eval task's own data
    unknown = [n for n in names if n not in BENCHMARKS or n in unpublished]
    if unknown:
        choices = ", ".join(n for n in BENCHMARKS if n not in unpublished)
        raise UserError(f"fetch: no published data for {unknown[0]!r}; choose from {choices}")
    written = []
    for name in names:
        if from_raw:
            local = hub.LOCAL[name]
            files = local.files(data_dir)
            if len(files) < local.n_files:
                raise UserError(
                    f"fetch {name} --from-raw: {len(files)} of {local.n_files} raw files under {data_dir}; "
                    "set --data-dir to the folder that holds them"
                )
            for file in files:
                target = Path(to) / file.relative_to(Path(data_dir).expanduser())
                write_whole(target, partial(shutil.copyfile, file))
            written.append(f"{name}: {len(files)} raw files -> {to}")
            continue
        source = hub.HUB.get(name)
        if source is None:
            raise UserError(
                f"fetch {name}: no Hub source is registered for it (src/benchmarks/hub.py); copy its raw files "
                f"with python -m src.data fetch {name} --from-raw --data-dir DIR --to {to}"
            )
        for config in source.configs():
            for split, hub_split in source.splits.items():
                dataset = hub_access.load_hub_dataset(name, source, config, split, to)
                target = (
                    Path(to) / "hub" / source.repo / source.layout_dir(config) / f"{hub_split}-00000-of-00001.parquet"
                )
                write_whole(target, lambda tmp: dataset.to_parquet(str(tmp)))  # noqa: B023 - called at once
                written.append(f"{name}: {len(dataset)} rows -> {target}")
    return written


def _pinned_files(data_dir: str) -> dict[str, str]:
    """relative path -> sha256 from a SOURCES.md beside the files (its per-file table), when there is one."""
    sources = Path(data_dir).expanduser() / "SOURCES.md"
    if not sources.is_file():
        return {}
    pattern = re.compile(r"^\| (\S+) \| .* \| ([0-9a-f]{64}) \|$", re.M)
    return dict(pattern.findall(sources.read_text(encoding="utf-8", errors="replace")))


def check_report(data_dir: str) -> tuple[list[str], int]:
    """(problems, benchmarks checked): the raw files present under `data_dir` against the pinned digests."""
    problems, checked, seen = [], 0, set()
    per_file = _pinned_files(data_dir)
    for name, local in hub.LOCAL.items():
        if id(local) in seen:  # truthfulqa_mc1 and mc2 read the same files
            continue
        seen.add(id(local))
        files = local.files(data_dir)
        if not files:
            continue
        checked += 1
        if len(files) != local.n_files:
            problems.append(
                f"{name}: {len(files)} of the {local.n_files} pinned files under {data_dir} "
                f"({', '.join(local.globs)}); fetch the missing ones"
            )
        digest = hub_access.local_digest(files, data_dir)
        if digest == local.digest:
            continue
        bad = [f.relative_to(Path(data_dir).expanduser()).as_posix() for f in files]
        bad = [
            rel for rel in bad if rel in per_file and file_sha256(Path(data_dir).expanduser() / rel) != per_file[rel]
        ]
        if bad:
            problems += [f"{name}: {rel} differs from the sha256 in SOURCES.md; fetch it again" for rel in bad]
        elif len(files) == local.n_files:
            problems.append(
                f"{name}: the files under {data_dir} differ from the pinned sha256 digest "
                f"({digest[:16]}, pinned {local.digest[:16]}); fetch them again"
            )
    return problems, checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.data", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    slots = commands.add_parser("slots", help="the distribution of the right answer's slot in a benchmark")
    slots.add_argument("benchmark", help="a benchmark name as in conf/benchmark (mmlu, truthfulqa_mc1, ...)")
    slots.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of the benchmark files (default {DEFAULT_DATA_DIR})"
    )
    slots.add_argument("--limit", type=int, default=None, help="only the first N questions")
    slots.add_argument("--seed", type=int, default=0, help="the run seed (TruthfulQA's option shuffle uses it)")
    slots.add_argument("--split", default=None, help="the split (default: the benchmark's evaluation split)")
    slots.add_argument("--path", default=None, help="the benchmark file or folder (default: the one under --data-dir)")
    listing = commands.add_parser("list", help="every benchmark: source, licence, questions, present, checksum")
    listing.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of the benchmark files (default {DEFAULT_DATA_DIR})"
    )
    fetching = commands.add_parser("fetch", help="prepare an offline data_dir: Hub datasets as parquet, or raw files")
    fetching.add_argument("benchmarks", nargs="+", help="benchmark names (mmlu, arc_challenge, ...)")
    fetching.add_argument("--to", required=True, help="the data_dir to fill (Hub parquet under DIR/hub/<repo>/...)")
    fetching.add_argument("--from-raw", action="store_true", help="copy the raw files from --data-dir instead")
    fetching.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="where --from-raw copies from")
    checking = commands.add_parser("check", help="the raw files present against their pinned sha256s")
    checking.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of the benchmark files (default {DEFAULT_DATA_DIR})"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            print(list_report(args.data_dir))
            return 0
        if args.command == "fetch":
            for line in fetch(args.benchmarks, to=args.to, from_raw=args.from_raw, data_dir=args.data_dir):
                print(line)
            return 0
        if args.command == "check":
            problems, checked = check_report(args.data_dir)
            for line in problems:
                print(f"error: {line}", file=sys.stderr)
            if problems:
                return 2
            print(f"ok: the raw files of {checked} benchmark sources under {args.data_dir} match their pinned sha256s")
            return 0
        print(
            slots_report(
                args.benchmark,
                data_dir=args.data_dir,
                limit=args.limit,
                seed=args.seed,
                split=args.split,
                path=args.path,
            )
        )
    except UserError as err:
        return user_error(err)
    return 0


if __name__ == "__main__":
    entry(main)
