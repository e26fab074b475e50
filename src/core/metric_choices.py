"""The choices of the metrics' options, named once: the config check (src/config/checks.py), the metrics
(src/metrics), the report's and ingest's `--sure-rule` flags read them from here. A module without imports, so that
reading a config loads no pandas."""

from __future__ import annotations

# metrics.sure_rule: how a question's R repetitions make it SURE or UNSURE, right or wrong (docs/metrics.md)
SURE_BY_ANSWER = "answer"  # section 3.2's letter vote: SURE when one answer reaches p* of R (the default)
SURE_BY_CORRECTNESS = "correctness"  # the paper's tables: SURE when all R trials are right or all wrong
SURE_RULES = (SURE_BY_ANSWER, SURE_BY_CORRECTNESS)  # the first is the default

# metrics.pride_protocol: which questions PriDe's accuracy scores (src/metrics/fluctuation.py)
PRIDE_PAPER = "paper"  # the questions outside the calibration share (docs/metrics.md; the default)
PRIDE_AUTHORS = "authors"  # every question, as the authors' code scores them
PRIDE_PROTOCOLS = (PRIDE_PAPER, PRIDE_AUTHORS)  # the first is the default
