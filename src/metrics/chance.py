"""Chance level: the accuracy of a guesser that picks uniformly among what each trial lets it answer.

One rule for every table and plot of the report (`src.compare`):

- a multiple-choice trial with k displayed options (NOTA and fillers included): 1/k;
- a true/false trial (`fmt` true_false): 1/2;
- a multi-select trial with k options (`fmt` multi_select): the guesser names a non-empty set of labels
  uniformly at random, and is right only when it names exactly the right option: 1/(2^k - 1).

Questions weigh equally, as in every metric: a question's chance is the mean over its trials, the run's the
mean over its questions. `chance_levels` gives it on the reference order (what MCQA, acc mean and the accuracy
on the original order are measured on) and over every variant (what MCQA+ and average accuracies are
measured on); with one option count everywhere the two are equal.

Decidability (`chance_verdict`), the one rule every place that prints a headline uses (the closing block, the
MLflow run description and review view, the report's tables and plots): a run's headline accuracy
(`HEADLINE_RULE`: acc mean in a run with repetitions, else MCQA, else accuracy over every trial) is compared with its
chance level; where the accuracy's interval contains chance
the run is "indistinguishable from chance", and its consistency metrics describe how a guesser's answers agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .answers import ORIGINAL

CHANCE_NAMES = {"chance": "on the reference order", "chance_variants": "over every variant"}
# the chance level that applies to an accuracy-like metric: `chance` on the reference order, `chance_variants`
# over every variant; a metric not listed (consistency, SURE shares, differences of ranks) has no chance level
CHANCE_OF = {
    "mcqa": "chance",
    "acc_mean": "chance",
    "accuracy": "chance_variants",
    "mcqa_plus": "chance_variants",
    "aacc@original": "chance",
}
# the accuracy a run is judged and ranked by, in this order: the first one a run logged. `acc_mean` is logged only by
# runs with two or more repetitions (src/metrics/repetition.py), where `mcqa` is repetition 0 alone: one sampled
# draw at the run's temperature, while acc_mean averages every draw; a run asked once has MCQA, the CoRA paper's
# headline; accuracy over every trial where neither was logged
VERDICT_METRICS = ("acc_mean", "mcqa", "accuracy")
HEADLINE_RULE = (
    "the headline of a condition is acc mean (the mean over its repetitions) where its runs asked each question "
    "two or more times, else MCQA (the original order, asked once), else the accuracy over every trial"
)
CHANCE_TAG = "chance"  # the run's tag that says it (`ChanceVerdict.tag`): the review view's chance column
AT_CHANCE = "indistinguishable from chance"
AT_CHANCE_MEANING = (
    "its accuracy cannot be told from guessing, so its consistency metrics (CoRA, RWS and S/T, "
    "answer fluctuation) describe how a guesser's answers agree, not what the model knows"
)


def trial_chance(n_options: int, fmt: str = "mcq") -> float:
    """The chance of guessing one trial right.

    >>> trial_chance(4), trial_chance(1, "true_false"), trial_chance(3, "multi_select")
    (0.25, 0.5, 0.14285714285714285)
    """
    if fmt == "true_false":
        return 0.5
    k = int(n_options)
    if k < 1:
        return math.nan
    if fmt == "multi_select":
        return 1.0 / float(2**k - 1)
    return 1.0 / k


def option_count_chance(n: int) -> float:
    """The chance of REVAS `acc@n` (n options shown): 1/n."""
    return 1.0 / n


def chance_levels(records: pd.DataFrame) -> dict[str, float]:
    """`chance` (reference order: the `original` variant where asked, else each question's first variant) and
    `chance_variants` (every variant), each the mean over questions of the mean 1/k over the question's trials.

    >>> r = pd.DataFrame({"question_id": ["a", "a", "b", "b"], "variant_kind": ["original", "decoupled"] * 2,
    ...                   "variant_id": ["original", "d1"] * 2, "n_options": [4, 2, 5, 2]})
    >>> {k: round(v, 3) for k, v in chance_levels(r).items()}
    {'chance': 0.225, 'chance_variants': 0.362}
    """
    if records.empty or "n_options" not in records.columns:
        return {}
    fmts = records["fmt"].fillna("mcq") if "fmt" in records.columns else pd.Series("mcq", index=records.index)
    frame = pd.DataFrame(
        {
            "question_id": records["question_id"].astype(str).to_numpy(),
            "variant_id": records["variant_id"].astype(str).to_numpy(),
            "original": (records["variant_kind"] == ORIGINAL).to_numpy(),
            "chance": [trial_chance(k, f) for k, f in zip(records["n_options"], fmts)],
        }
    )
    frame = frame.drop_duplicates(["question_id", "variant_id"])  # repetitions ask the same trial again
    every = frame.groupby("question_id", sort=False)["chance"].mean()
    reference = frame[frame["original"]]
    if reference.empty:  # REVAS re-orders, permutation sets: the first variant each question was asked in
        reference = frame.groupby("question_id", sort=False).head(1)
    first = reference.groupby("question_id", sort=False)["chance"].mean()
    return {"chance": float(first.mean()), "chance_variants": float(every.mean())}


@dataclass(frozen=True)
class ChanceVerdict:
    """A run's accuracy `metric` against its chance level: `at_chance` when the accuracy's interval [lo, hi]
    contains chance (None when the run logged no interval: undecided)."""

    metric: str
    value: float
    chance: float
    lo: float | None = None
    hi: float | None = None

    @property
    def at_chance(self) -> bool | None:
        if self.lo is None or self.hi is None:
            return None
        return self.lo <= self.chance <= self.hi

    def short(self) -> str:
        """`indistinguishable from chance`, `above chance`, `below chance`, or '' when undecided."""
        if self.at_chance is None:
            return ""
        if self.at_chance:
            return AT_CHANCE
        return "above chance" if self.value > self.chance else "below chance"

    def tag(self) -> str:
        """The run's `chance` tag (the review view's chance column).

        >>> ChanceVerdict("mcqa", 0.23, 0.2262, 0.158, 0.322).tag()
        '0.226: mcqa indistinguishable from chance'
        """
        return f"{self.chance:.3f}" + (f": {self.metric} {self.short()}" if self.short() else "")

    def sentence(self, *, explain: bool = True) -> str:
        """What the verdict means, in one sentence: only a run at chance gets one ('' otherwise).

        >>> print(ChanceVerdict("mcqa", 0.23, 0.226, 0.158, 0.322).sentence())  # doctest: +NORMALIZE_WHITESPACE
        mcqa's interval [0.158, 0.322] contains chance (0.226): this run is indistinguishable from chance; its
        accuracy cannot be told from guessing, so its consistency metrics (CoRA, RWS and S/T, answer fluctuation)
        describe how a guesser's answers agree, not what the model knows.
        >>> ChanceVerdict("mcqa", 0.8, 0.25, 0.7, 0.9).sentence()
        ''
        """
        if not self.at_chance:
            return ""
        meaning = AT_CHANCE_MEANING if explain else "what that means is said above"
        return (
            f"{self.metric}'s interval [{self.lo:.3f}, {self.hi:.3f}] contains chance ({self.chance:.3f}): "
            f"this run is {AT_CHANCE}; {meaning}."
        )


# a run's metrics: a dict, or a row of the report's runs table
Metrics = Mapping[str, Any] | pd.Series


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def verdict_of(metrics: Metrics, name: str) -> ChanceVerdict | None:
    """The verdict on the accuracy-like metric `name` (one of CHANCE_OF) of a run's metrics; None without a value
    or a chance level."""
    value = _finite(metrics.get(name))
    chance = _finite(metrics.get(CHANCE_OF[name])) if name in CHANCE_OF else None
    if value is None or chance is None:
        return None
    return ChanceVerdict(name, value, chance, _finite(metrics.get(f"{name}_lo")), _finite(metrics.get(f"{name}_hi")))


def chance_verdict(metrics: Metrics) -> ChanceVerdict | None:
    """The verdict on a run's metrics (a dict, or a row of the report's runs table) that hold a chance level
    (`chance`, `chance_variants`, as `chance_levels` gives them): the first of VERDICT_METRICS with a chance
    level, with its interval (`<name>_lo`, `<name>_hi`) when logged; None when no accuracy has a chance level.

    >>> chance_verdict({"mcqa": 0.23, "mcqa_lo": 0.158, "mcqa_hi": 0.322, "chance": 0.226}).short()
    'indistinguishable from chance'
    >>> chance_verdict({"mcqa": 0.8, "mcqa_lo": 0.7, "mcqa_hi": 0.88, "chance": 0.25}).short()
    'above chance'
    >>> chance_verdict({"rws": 0.5}) is None
    True
    """
    return next(filter(None, (verdict_of(metrics, name) for name in VERDICT_METRICS)), None)


def chance_tags(metrics: Metrics) -> dict[str, str]:
    """The run's CHANCE_TAG (`ChanceVerdict.tag`), with its INVALID share where that is above INVALID_FLAG (the
    review view's chance column is where the verdict is read), or none when its metrics hold no chance level.

    >>> chance_tags({"mcqa": 0.8, "mcqa_lo": 0.7, "mcqa_hi": 0.88, "chance": 0.25})
    {'chance': '0.250: mcqa above chance'}
    >>> chance_tags({"mcqa": 0.4, "mcqa_lo": 0.3, "mcqa_hi": 0.5, "chance": 0.25, "invalid_rate": 0.33})
    {'chance': '0.250: mcqa above chance; INVALID 0.33 (above 0.10)'}
    """
    verdict = chance_verdict(metrics)
    if verdict is None:
        return {}
    rate = _finite(metrics.get("invalid_rate"))
    flag = f"; INVALID {rate:.2f} (above {INVALID_FLAG:.2f})" if invalid_flag(metrics) else ""
    return {CHANCE_TAG: verdict.tag() + flag}


# A run whose share of unparsed answers (`invalid_rate`) is above this is flagged wherever its verdict is printed
# (closing block, report summary and bottom line, MLflow review view). Why 0.10: every accuracy counts an INVALID
# answer wrong, so an INVALID share of 0.10 can move an accuracy by up to 0.10, five times the difference the
# questions-needed table is made for by default (0.02) and more than most gaps between two models: the number
# then measures the answer format (the parser, or probability off the label tokens) as much as the model.
INVALID_FLAG = 0.10


def invalid_flag(metrics: Metrics) -> str:
    """`INVALID 0.33 of trials (above 0.10): ...` for a run whose `invalid_rate` is above INVALID_FLAG, else ''.

    >>> invalid_flag({"invalid_rate": 0.33})  # doctest: +ELLIPSIS
    'INVALID 0.330 of trials (above 0.10): its accuracies count them wrong, ...'
    >>> invalid_flag({"invalid_rate": 0.05}), invalid_flag({})
    ('', '')
    """
    rate = _finite(metrics.get("invalid_rate"))
    if rate is None or rate <= INVALID_FLAG:
        return ""
    return (
        f"INVALID {rate:.3f} of trials (above {INVALID_FLAG:.2f}): its accuracies count them wrong, so they measure "
        "the answer format as much as the model"
    )


# A lead is said to come mostly from the runner-up's unparsed answers when, on the answers each model parsed, the
# leader's lead is at most this share of its lead as counted (INVALID wrong): see `invalid_lead`
INVALID_LEAD_SHARE = 0.5


def invalid_lead(leader: tuple[str, Metrics], runner_up: tuple[str, Metrics], metric: str) -> str:
    """Where the runner-up's INVALID share is the larger and, on the answers each model parsed (its `metric` over
    its parsed share, `value / (1 - invalid_rate)`), the leader's lead is at most INVALID_LEAD_SHARE of its lead as
    counted: the sentence that says the lead comes mostly from the runner-up's unparsed answers; '' otherwise. Each
    side is (model name, its metrics). The parsed share is over every trial of the run, the metric's own trials or
    more. The one rule of the report's bottom line and summary (`src.compare.summary`) and of `src.plan`.

    >>> invalid_lead(("a", {"mcqa": 0.5, "invalid_rate": 0.0}), ("b", {"mcqa": 0.25, "invalid_rate": 0.5}), "mcqa")
    "the lead comes mostly from b's INVALID answers (0.50 of its trials, counted wrong; a 0.00): on the answers it \
parsed b is right 0.50, a 0.50"
    >>> invalid_lead(("a", {"mcqa": 0.8, "invalid_rate": 0.0}), ("b", {"mcqa": 0.3, "invalid_rate": 0.1}), "mcqa")
    ''
    """
    (a_name, a), (b_name, b) = leader, runner_up
    rate_a, rate_b = (_finite(m.get("invalid_rate")) for m in (a, b))
    value_a, value_b = (_finite(m.get(metric)) for m in (a, b))
    if rate_a is None or rate_b is None or value_a is None or value_b is None:
        return ""
    lead = value_a - value_b
    if not rate_b > rate_a or not lead > 0:
        return ""
    parsed_a = value_a / (1 - rate_a)  # rate_a < rate_b <= 1
    parsed_b = value_b / (1 - rate_b) if rate_b < 1 else None
    if parsed_b is not None and parsed_a - parsed_b > INVALID_LEAD_SHARE * lead:
        return ""
    given = (
        f"on the answers it parsed {b_name} is right {parsed_b:.2f}, {a_name} {parsed_a:.2f}"
        if parsed_b is not None
        else f"{b_name} parsed no answer"
    )
    return (
        f"the lead comes mostly from {b_name}'s INVALID answers ({rate_b:.2f} of its trials, counted wrong; "
        f"{a_name} {rate_a:.2f}): {given}"
    )
