"""Each vocabulary the modules share (variant kinds, SURE rules, PriDe protocols, option_refs policies, the cloze
scorings) is written out once, in the module that names it, and imported everywhere else: no other module of src/
spells its words out again as a tuple, list or set (a renamed kind or rule would then drift from its copy)."""

from __future__ import annotations

import ast
from pathlib import Path

from src.config.schema import JobConfig, MetricsConfig
from src.core.metric_choices import PRIDE_PROTOCOLS, SURE_RULES
from src.core.prompts import CLOZE_SCORINGS
from src.core.variant import CORA_KINDS, REVAS_KINDS
from src.variants.rules import POLICIES

REPO = Path(__file__).resolve().parents[1]
# vocabulary -> (the module that spells it out, how many of its words a collection must hold to be a copy of it)
VOCABULARIES = {
    "CORA_KINDS": (CORA_KINDS, "src/core/variant.py", 3),
    "REVAS_KINDS": (REVAS_KINDS, "src/core/variant.py", 3),
    "SURE_RULES": (SURE_RULES, "src/core/metric_choices.py", 2),
    "PRIDE_PROTOCOLS": (PRIDE_PROTOCOLS, "src/core/metric_choices.py", 2),
    "POLICIES": (POLICIES, "src/variants/rules.py", 2),
    "CLOZE_SCORINGS": (CLOZE_SCORINGS, "src/core/prompts.py", 2),
}


def spelled_out(path: Path, words: tuple[str, ...], enough: int) -> list[int]:
    """Lines of `path` with a tuple, list or set literal holding `enough` or more of `words` as plain strings."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            texts = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(texts & set(words)) >= enough:
                lines.append(node.lineno)
    return lines


def copies(root: Path = REPO) -> list[str]:
    found = []
    for name, (words, home, enough) in VOCABULARIES.items():
        for path in sorted((root / "src").rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative != home:
                found += [f"{relative}:{line} spells out {name}" for line in spelled_out(path, words, enough)]
    return found


def test_each_vocabulary_is_spelled_out_once():
    assert copies() == []


def test_the_check_finds_a_copy(tmp_path):
    (tmp_path / "src" / "metrics").mkdir(parents=True)
    (tmp_path / "src" / "metrics" / "x.py").write_text('RULES = ("answer", "correctness")\nOK = ("answer",)\n')
    assert copies(tmp_path) == ["src/metrics/x.py:1 spells out SURE_RULES"]


def test_the_config_defaults_are_the_vocabularies_first_words():
    """The schema's defaults stay literal beside their comments; they are the first word of each vocabulary."""
    assert (MetricsConfig().sure_rule, MetricsConfig().pride_protocol) == (SURE_RULES[0], PRIDE_PROTOCOLS[0])
    assert JobConfig.__dataclass_fields__["option_refs"].default == POLICIES[0]
