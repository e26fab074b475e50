"""Reading a benchmark's Hub dataset: from a Hub-layout snapshot folder, the `datasets` cache or a download (the
order `hub.py` gives), offline detection and the one-line error when it is absent; and what `python -m src.data`
checks: the digest of the raw files, whether the `datasets` cache holds a copy.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from src.common.digests import file_sha256, text_sha256
from src.common.errors import UserError
from src.core.questions import Question

from .hub import HUB, LOCAL, HubSource
from .hub_rows import wanted_mmlu_subjects
from .validate import choose_split

HUB_DIR_ENV = "MCQ_HUB_DIR"
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def fetch_command(name: str, data_dir: str | Path) -> str:
    return f"python -m src.data fetch {name} --to {data_dir}"


def raw_present(name: str, data_dir: str | Path, split: str | None, options: Mapping[str, Any] | None) -> bool:
    """Whether the raw file the loader reads for `split` is under `data_dir` (True when unknown: the raw loader
    decides)."""
    local, source = LOCAL.get(name), HUB.get(name)
    if local is None or source is None:
        return True
    our_split = split if split is not None else next(iter(source.splits))
    if our_split not in source.splits:
        return True  # the raw loader names the valid splits
    try:
        relative = local.default(our_split, options or {})
    except Exception:  # noqa: BLE001 - an odd option: let the raw loader report it
        return True
    return (Path(data_dir).expanduser() / relative).exists()


def offline() -> bool:
    """`HF_HUB_OFFLINE` or `HF_DATASETS_OFFLINE` set true now (not only when `datasets` was imported)."""
    return any(os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"} for var in OFFLINE_ENVS)


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hub cannot be reached (its host does not resolve or connect within `timeout`), or None.

    Checked before a download so that a machine without network fails in milliseconds rather than after
    `huggingface_hub`'s retries (~25 s); skipped (None) behind a proxy, which may be the only way out.
    """
    if any(os.environ.get(var) for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        return f"no network: {host} {type(err).__name__}"
    return None


@contextlib.contextmanager
def offline_libraries(on: bool) -> Iterator[None]:
    """`datasets` and `huggingface_hub` read the offline variables when imported; set their flags for one load."""
    if not on:
        yield
        return
    import datasets.config
    import huggingface_hub.constants

    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


def snapshot_roots(data_dir: str | Path | None) -> list[Path]:
    """Folders that may hold Hub-layout snapshots: `$MCQ_HUB_DIR`, then `data_dir/hub`."""
    roots = [Path(os.environ[HUB_DIR_ENV]).expanduser()] if os.environ.get(HUB_DIR_ENV) else []
    if data_dir is not None:
        roots.append(Path(data_dir).expanduser() / "hub")
    return roots


def snapshot_files(source: HubSource, config: str | None, hub_split: str, data_dir: str | Path | None) -> list[Path]:
    """The parquet files of one config and split in the first snapshot folder that has them."""
    for root in snapshot_roots(data_dir):
        folder = root / source.repo / source.layout_dir(config)
        files = sorted(folder.glob(f"{hub_split}-*.parquet"))
        if files:
            return files
    return []


def _require_datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise UserError(
            "reading a benchmark from the Hugging Face Hub needs the datasets package; "
            "pip install datasets (or pip install -e .), or set data_dir to the raw files"
        ) from None
    return datasets


def _read_parquet(files: list[Path]) -> list[dict[str, Any]]:
    datasets = _require_datasets()
    try:
        return list(datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train"))
    except Exception as err:  # noqa: BLE001 - a damaged file: one line naming it
        raise UserError(
            " ".join(
                f"{files[0].parent}: cannot read the parquet files ({type(err).__name__}: {err}); "
                "fetch them again".split()
            )
        ) from None


def absent_error(
    name: str,
    source: HubSource,
    split: str | None,
    data_dir: str | Path,
    reason: str = "offline",
    options: Mapping[str, Any] | None = None,
) -> UserError:
    """`benchmark mmlu: files absent under D (no D/mmlu/test) and the Hub dataset cais/mmlu (all, test) is not in
    ...`"""
    local = LOCAL.get(name)
    our_split = split if split is not None else next(iter(source.splits))
    missing = f" (no {Path(data_dir) / local.default(our_split, options or {})})" if local is not None else ""
    return UserError(
        f"benchmark {name}: files absent under {data_dir}{missing} and the Hub dataset "
        f"{source.describe(our_split)} is not in the cache and cannot be downloaded ({reason}); "
        f"run {fetch_command(name, data_dir)} on a machine with network, or set data_dir "
        "(or benchmark.path) to the files"
    )


def read_hub_rows(
    name: str, source: HubSource, config: str | None, split: str, data_dir: str | Path, *, allow_snapshot: bool = True
) -> tuple[list[dict[str, Any]], str]:
    """(rows, where they came from) of one config and our split: a snapshot folder, else `datasets.load_dataset`."""
    hub_split = source.splits[split]
    files = snapshot_files(source, config, hub_split, data_dir) if allow_snapshot else []
    if files:
        return _read_parquet(files), str(files[0].parent)
    dataset = load_hub_dataset(name, source, config, split, data_dir)
    return list(dataset), f"hf://datasets/{source.repo}@{source.revision}/{source.layout_dir(config)}/{hub_split}"


def load_hub_dataset(name: str, source: HubSource, config: str | None, split: str, data_dir: str | Path) -> Any:
    """`datasets.load_dataset(repo, config, split=..., revision=...)`: the cache, or a download when online."""
    hub_split = source.splits[split]
    datasets = _require_datasets()
    unreachable = None if offline() else hub_unreachable()
    is_offline = offline() or unreachable is not None  # unreachable: the cache alone, as offline
    try:
        with offline_libraries(is_offline):
            rows = datasets.load_dataset(source.repo, config, split=hub_split, revision=source.revision)
    except Exception as err:  # noqa: BLE001 - offline, unreachable, absent: one line
        reason = (
            ("offline" if offline() else unreachable) if is_offline else f"the Hub refused: {type(err).__name__}: {err}"
        )
        raise absent_error(name, source, split, data_dir, " ".join(str(reason).split())) from None
    return rows


def hub_questions(
    name: str, *, data_dir: str | Path, split: str | None, seed: int, options: Mapping[str, Any]
) -> list[Question]:
    """The benchmark's questions from its Hub dataset (a snapshot folder, the `datasets` cache or a download)."""
    source = HUB[name]
    split = choose_split(split, tuple(source.splits), name)
    for key, only in source.options.items():
        if key in options and str(options[key]) != only:
            raise UserError(
                f"config key benchmark.{key}: the Hub dataset {source.repo} has only {key} {only}; "
                f"set it to {only}, or data_dir to the raw files of {key} {options[key]}"
            )
    shuffle = options.get("shuffle", True)
    if not isinstance(shuffle, bool):  # checked before any download, as the raw loaders do before reading
        raise UserError(
            f"config key benchmark.shuffle: {shuffle!r} is not true or false; true (the default) "
            "shuffles the options with the run's seed, false keeps the file order"
        )
    configs = source.configs(options)
    if name == "mmlu":
        wanted_mmlu_subjects(options)  # an unknown subject is refused before any download
    questions: list[Question] = []
    for config in configs:
        rows, place = read_hub_rows(name, source, config, split, data_dir)
        extra = {"subject": config} if source.config == "{subject}" else {}
        questions += source.convert(rows, name=name, split=split, seed=seed, options=options, place=place, **extra)
    return questions


def local_digest(files: list[Path], root: str | Path) -> str:
    """sha256 of `<relative path> <file sha256>\\n` lines in path order (what `LocalFiles.digest` pins)."""
    lines = "".join(f"{f.relative_to(Path(root).expanduser()).as_posix()} {file_sha256(f)}\n" for f in files)
    return text_sha256(lines)


def in_datasets_cache(source: HubSource) -> bool:
    """Whether the `datasets` cache holds a prepared copy of the repo: `<owner>___<name>/<config>/<version>/<hash>/`
    with its `dataset_info.json`. A build killed halfway leaves `<hash>.incomplete/` (and `huggingface_hub` an
    `.incomplete` download), which `datasets` reuses on the next load and which is not a copy."""
    cache = os.environ.get("HF_DATASETS_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"),
        "datasets",
    )
    owner, _, repo = source.repo.partition("/")
    # the folder name datasets' CachedDatasetModuleFactory looks for (datasets.naming.camelcase_to_snakecase)
    snake = re.sub(r"([a-z\d])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", repo)).lower()
    folder = Path(cache).expanduser() / f"{owner}___{snake}"
    return any(not info.parent.name.endswith(".incomplete") for info in folder.glob("*/*/*/dataset_info.json"))
