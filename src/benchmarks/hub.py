"""Where each benchmark is published on the Hugging Face Hub, and which raw files stand for it: the registry
(`HUB`, `LOCAL`). Its rows become `Question`s in `hub_rows.py`; they are read in `hub_access.py`.

`load_benchmark` reads, in order: an explicit `benchmark.path`; the raw files under `data_dir`
(the readers in the other modules, for offline clusters and the published raw formats); then
the benchmark's Hub dataset (`hub_access.hub_questions`), looked for in this order:

1. a Hub-layout snapshot folder named by `MCQ_HUB_DIR` (`$MCQ_HUB_DIR/<repo id>/<layout dir>/<split>-*.parquet`,
   e.g. `.../cais/mmlu/all/test-00000-of-00001.parquet`: the Hub's parquet files as published);
2. the same layout under `data_dir/hub/` (what `python -m src.data fetch NAME --to DIR` writes);
3. `datasets.load_dataset(repo, config, split=..., revision=...)`: the `datasets` cache, or a
   download when online. Offline (`HF_HUB_OFFLINE=1` / `HF_DATASETS_OFFLINE=1`, read when the
   benchmark loads) and absent, or the Hub unreachable: one-line `UserError` naming the dataset
   and the fetch command (exit 2).

Snapshot files (1, 2) are read with `datasets.load_dataset("parquet", data_files=...)`, and every
row, from any of the three, goes through the benchmark's one row converter, the same function its
raw file loader turns each record into a Hub row for (`hub_rows.py` names them), so the cleaning,
checks, ids, texts and options (`subjects`, `only_ok`, `shuffle`) are the same either way. Questions
come in the Hub's row order.

Ids and differences from the raw files (see `../shared/data/SOURCES.md` for those):

- mmlu (`cais/mmlu`, config `all`): `mmlu/<subject>/<split>/<row within the subject>`, as the raw
  CSVs; split `val` is the Hub's `validation`. Assumed (not checked here): `all` holds the
  subjects in name order, each in its CSV's row order, so ids and order equal the raw loader's.
- mmlu_redux (`edinburgh-dawg/mmlu-redux-2.0`, one config per subject, split `test`):
  `mmlu_redux/<subject>/<row>`. The raw files are MMLU-Redux from `aryopg/mmlu-redux`; 2.0 is
  the corrected release, whose annotations may differ.
- arc_challenge / arc_easy (`allenai/ai2_arc`, `ARC-Challenge` / `ARC-Easy`): the ARC ids;
  `dev` is the Hub's `validation`. The Hub's `question` is the stem.
- truthfulqa_mc1 / mc2 (`truthfulqa/truthful_qa`, `multiple_choice`, split `validation`): only
  version v1 (817 questions); ids `truthfulqa_<task>/v1/<row>`; no subject (the Hub's
  multiple_choice config has no Category), so per-subject metrics are absent.
- medqa_4 (`GBaker/MedQA-USMLE-4-options`, `test`): `medqa_4/<row>`. medqa (5 options) has no
  Hub source here: raw files only.
- medmcqa (`openlifescienceai/medmcqa`, `validation`): `medmcqa/<row>`; options opa..opd, answer
  `cop`, subject `subject_name` (the raw reduced export has no subject).
- commonsenseqa (`tau/commonsense_qa`, `validation` as our `dev`): the record ids.
- hellaswag (`Rowan/hellaswag`, `validation` as our `val`): `hellaswag/<row>`; the question is
  lm-eval's query, `activity_label: ctx_a ctx_b.capitalize()` with lm-eval's clean-up, the endings
  cleaned the same way. The raw text file joins ctx_a and ctx_b; its reader takes ctx_b back
  (`commonsense.hellaswag_file_row`) so that both give lm-eval's text. Only the Hub has `ind`
  (`metadata["ind"]`).
- winogrande (`allenai/winogrande`, `winogrande_xl`, `validation` as our `dev`): `winogrande/<row>`
  from either (the Hub has no qID, so the raw file's qIDs are not the ids).

Revisions: the sha of no Hub commit could be verified from here (no network), so every source
pins the branch `main` (which every Hub repository has); put a commit sha in `revision` once one
is checked. The licences are as SOURCES.md states them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .hub_rows import (
    MMLU_SUBJECTS,
    Converter,
    hellaswag_rows,
    labelled_rows,
    medmcqa_rows,
    medqa_4_rows,
    mmlu_redux_rows,
    mmlu_rows,
    truthfulqa_rows,
    winogrande_rows,
)
from .mmlu import wanted_subjects

REVISION = "main"  # unverified from here: no Hub commit sha could be checked without network


@dataclass(frozen=True)
class LocalFiles:
    """The raw files a benchmark's loader reads under `data_dir`, and the sha256 pinned for them.

    `digest` is the sha256 of the lines `<relative path> <file sha256>\\n` of `globs`' files in path
    order; every file's sha256 was checked against `../shared/data/SOURCES.md` when it was pinned.
    """

    globs: tuple[str, ...]
    n_files: int
    digest: str
    default: Callable[[str, Mapping[str, Any]], str]  # (split, options) -> the path the loader reads

    def files(self, data_dir: str | Path) -> list[Path]:
        root = Path(data_dir).expanduser()
        return sorted({p for pattern in self.globs for p in root.glob(pattern) if p.is_file()})


@dataclass(frozen=True)
class HubSource:
    """A benchmark's published dataset: repository, config, our split -> the Hub's, revision, licence, size."""

    repo: str
    config: str | None  # None: the default config; "{subject}": one config per MMLU subject
    splits: Mapping[str, str]  # our split name -> the Hub split, the first is the default
    licence: str
    n_questions: int  # in the default split
    convert: Converter
    revision: str = REVISION
    options: Mapping[str, Any] = field(default_factory=dict)  # options only the raw files support

    def configs(self, options: Mapping[str, Any] | None = None) -> list[str | None]:
        if self.config != "{subject}":
            return [self.config]
        return list(wanted_subjects(options or {}, list(MMLU_SUBJECTS), "mmlu", f"the Hub dataset {self.repo}"))

    def layout_dir(self, config: str | None) -> str:
        """The folder of a config's parquet files in the repository: the config's name, `data` for the default."""
        return config or "data"

    def describe(self, split: str | None = None) -> str:
        """`cais/mmlu (all, test)`."""
        hub_split = (
            self.splits[split] if split is not None and split in self.splits else next(iter(self.splits.values()))
        )
        config = "one config per subject" if self.config == "{subject}" else (self.config or "default")
        return f"{self.repo} ({config}, {hub_split})"


def _fixed(path: str) -> Callable[[str, Mapping[str, Any]], str]:
    return lambda split, options: path


LOCAL: dict[str, LocalFiles] = {
    "mmlu": LocalFiles(
        ("mmlu/test/*.csv", "mmlu/dev/*.csv", "mmlu/val/*.csv"),
        171,
        "e79cbf5a0f6f318b47470074634249c408631c1821b8199bfb89a03fa8ddb6de",
        lambda s, o: f"mmlu/{s}",
    ),
    "mmlu_redux": LocalFiles(
        ("mmlu_redux/*.csv",),
        57,
        "715738b145cef1175e023b0836bd046e2be52e467f81a8355b1610736c933705",
        _fixed("mmlu_redux"),
    ),
    "arc_challenge": LocalFiles(
        ("arc_challenge/ARC-Challenge-*.jsonl",),
        3,
        "03f7c09085107b6375a1bbad1e030e95db1ad20647197a3439d1f7dd2e03779a",
        lambda s, o: f"arc_challenge/ARC-Challenge-{s.capitalize()}.jsonl",
    ),
    "arc_easy": LocalFiles(
        ("arc_easy/ARC-Easy-*.jsonl",),
        1,
        "e25e773c1163537c9dd42f91ea6362f0cefee8aa4627af5ab8fbb706e90a8c22",
        lambda s, o: f"arc_easy/ARC-Easy-{s.capitalize()}.jsonl",
    ),
    "medqa": LocalFiles(
        ("medqa/test.jsonl",),
        1,
        "ac89f646bc18a2b2ff57d0b90cc38343165ccb18fa3ff7ba2bf3ae30270f14fc",
        _fixed("medqa/test.jsonl"),
    ),
    "medqa_4": LocalFiles(
        ("medqa/4_options/phrases_no_exclude_test.jsonl",),
        1,
        "c5a53405cdcf48b0c5f7d34633178ba7077b906756289585a93605a9a498e69b",
        _fixed("medqa/4_options/phrases_no_exclude_test.jsonl"),
    ),
    "medmcqa": LocalFiles(
        ("medmcqa/validation.jsonl",),
        1,
        "282ba4cc09c8f4b114f970385c9768c7a31e88fe2c3ddddc257bae9741e93b27",
        _fixed("medmcqa/validation.jsonl"),
    ),
    "commonsenseqa": LocalFiles(
        ("commonsenseqa/dev_rand_split.jsonl",),
        1,
        "0e8f97b3152477f011b2fbc8b39e1034216fbfe0a9cd601f028ab7c81ac737b5",
        _fixed("commonsenseqa/dev_rand_split.jsonl"),
    ),
    "hellaswag": LocalFiles(
        ("hellaswag/hellaswag_val_full.txt.bz2",),
        1,
        "c0eca68531e82104cbe47017de74fb3cd5601ac735cce8fb2e934b5db9141604",
        _fixed("hellaswag/hellaswag_val_full.txt.bz2"),
    ),
    "winogrande": LocalFiles(
        ("winogrande/dev.jsonl", "winogrande/dev-labels.lst"),
        2,
        "274ce268e308f602e3ab15ca937de402f36d612e4ab4ad71903b0790ffe4bbb0",
        _fixed("winogrande/dev.jsonl"),
    ),
}
_TRUTHFULQA_FILES = LocalFiles(
    (
        "truthfulqa/mc_task.json",
        "truthfulqa/TruthfulQA.csv",
        "truthfulqa/v1/mc_task.json",
        "truthfulqa/v1/TruthfulQA.csv",
    ),
    4,
    "cc143bfa96653a9172077a4be48841d4b297609fb209f0828702fe63d242931e",
    lambda s, o: "truthfulqa/mc_task.json" if str(o.get("version", "v1")) == "2025" else "truthfulqa/v1/mc_task.json",
)
LOCAL["truthfulqa_mc1"] = LOCAL["truthfulqa_mc2"] = _TRUTHFULQA_FILES

# Raw loaders' split names; the Hub's names of the same splits.
HUB: dict[str, HubSource] = {
    "mmlu": HubSource("cais/mmlu", "all", {"test": "test", "dev": "dev", "val": "validation"}, "MIT", 14042, mmlu_rows),
    "mmlu_redux": HubSource(
        "edinburgh-dawg/mmlu-redux-2.0", "{subject}", {"test": "test"}, "CC BY 4.0", 5700, mmlu_redux_rows
    ),
    "arc_challenge": HubSource(
        "allenai/ai2_arc",
        "ARC-Challenge",
        {"test": "test", "dev": "validation", "train": "train"},
        "CC BY-SA 4.0",
        1172,
        labelled_rows,
    ),
    "arc_easy": HubSource(
        "allenai/ai2_arc",
        "ARC-Easy",
        {"test": "test", "dev": "validation", "train": "train"},
        "CC BY-SA 4.0",
        2376,
        labelled_rows,
    ),
    "truthfulqa_mc1": HubSource(
        "truthfulqa/truthful_qa",
        "multiple_choice",
        {"test": "validation"},
        "Apache-2.0",
        817,
        truthfulqa_rows("mc1"),
        options={"version": "v1"},
    ),
    "truthfulqa_mc2": HubSource(
        "truthfulqa/truthful_qa",
        "multiple_choice",
        {"test": "validation"},
        "Apache-2.0",
        817,
        truthfulqa_rows("mc2"),
        options={"version": "v1"},
    ),
    "medqa_4": HubSource("GBaker/MedQA-USMLE-4-options", None, {"test": "test"}, "MIT", 1273, medqa_4_rows),
    "medmcqa": HubSource(
        "openlifescienceai/medmcqa",
        None,
        {"validation": "validation"},
        "MIT (upstream; HF card: Apache-2.0)",
        4183,
        medmcqa_rows,
    ),
    "commonsenseqa": HubSource(
        "tau/commonsense_qa",
        None,
        {"dev": "validation"},
        "MIT (HF card, not checked)",
        1221,
        lambda rows, **kw: labelled_rows(rows, metadata_fields=("question_concept",), **kw),
    ),
    "hellaswag": HubSource("Rowan/hellaswag", None, {"val": "validation"}, "MIT", 10042, hellaswag_rows),
    "winogrande": HubSource(
        "allenai/winogrande",
        "winogrande_xl",
        {"dev": "validation"},
        "Apache-2.0 (repo LICENSE; HF card: CC-BY)",
        1267,
        winogrande_rows,
    ),
}
LOCAL_LICENCES = {"medqa": "MIT (upstream jind11/MedQA)", "synthetic": "built in", "generic": "your file"}
LOCAL_COUNTS = {"medqa": 1273}
