"""Guessing theory: the CoRA paper's Table 7, MSGR, p* and the early-stop rule."""

import pytest
from hypothesis import given, strategies as st

from src.metrics import T, can_stop, msgr, p_star

# CoRA paper Table 7, column "random (r = 1/k)", M = 10, k = 5, as printed
TABLE_7_T = [
    "1.000",
    "0.893",
    "0.624",
    "0.322",
    "0.121",
    "0.033",
    "0.006",
    "0.0009",
    "0.00008",
    "0.000004",
    "0.0000001",
]


@pytest.mark.parametrize("p, printed", enumerate(TABLE_7_T))
def test_t_reproduces_table_7_to_printed_precision(p, printed):
    decimals = len(printed.split(".")[1])
    assert round(T(p, M=10, r=1 / 5), decimals) == pytest.approx(float(printed), abs=10 ** -(decimals + 3))


def test_t_edges():
    assert T(0, M=10, r=0.3) == 1.0 and T(-1, M=10, r=0.3) == 1.0
    assert T(11, M=10, r=0.9) == 0.0
    assert T(10, M=10, r=1.0) == 1.0
    assert T(3, M=3, r=0.5) == pytest.approx(0.125)


def test_msgr_values_metrics_md_quotes():
    assert round(msgr(10, M=10, k=5, conf=0.999), 4) == 0.9999
    assert round(msgr(9, M=10, k=5, conf=0.999), 3) == 0.995
    assert msgr(0, M=10, k=5) == pytest.approx(0.2)  # floor at 1/k, as the table's first row


@pytest.mark.promise("docs/metrics.md", "MSGR(p) is the smallest rate r with T(p; M, r) >= 0.999")
@pytest.mark.parametrize("p", range(1, 11))
def test_msgr_is_the_smallest_rate_meeting_conf(p):
    r = msgr(p, M=10, k=5, conf=0.999)
    assert T(p, M=10, r=r) >= 0.999
    assert r == pytest.approx(0.2) or T(p, M=10, r=r - 1e-6) < 0.999


def test_msgr_is_increasing_in_p():
    values = [msgr(p, M=10, k=5) for p in range(11)]
    assert values == sorted(values)


@given(st.integers(1, 12), st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_t_is_monotone_in_r(p, r1, r2):
    lo, hi = sorted((r1, r2))
    assert T(p, M=12, r=lo) <= T(p, M=12, r=hi) + 1e-15


@pytest.mark.promise("docs/metrics.md", "p* is 9 for R = 10 at consistency level 0.99")
@pytest.mark.parametrize("k", [4, 5])
def test_p_star_is_9_for_10_repetitions(k):
    # non-determinism paper, section 3.1: 0.99-consistency over 10 repetitions of 4 or 5 choices = 9 of 10
    assert p_star(R=10, consistency=0.99, k=k) == 9


def test_p_star_other_settings():
    assert p_star(R=10, consistency=0.9) == 6  # MSGR(6) ~ 0.910
    assert p_star(R=2, consistency=0.99) == 2
    assert p_star(R=10, consistency=0.1, k=4) == 0  # below 1/k every question is SURE
    with pytest.raises(ValueError, match="out of reach"):
        p_star(R=10, consistency=0.99999)


@pytest.mark.parametrize(
    "counts, expected",
    [
        ({"A": 9}, True),  # SURE reached with one trial to spare
        ({"A": 8}, False),  # 8 + 2 remaining could still reach 9
        ({"A": 7, "B": 1}, False),  # 7 + 2 remaining = 9
        ({"A": 7, "B": 2}, True),  # 7 + 1 remaining < 9: SURE impossible
        ({"A": 1, "B": 1}, False),
        ({"A": 1, "B": 1, "INVALID": 1}, True),  # the paper: three different answers already make it UNSURE
        ({}, False),
        ([5, 5], True),  # counts as a plain list; all 10 trials made
    ],
)
def test_can_stop(counts, expected):
    assert can_stop(counts, R=10, p_star=9) is expected


@given(st.lists(st.integers(1, 6), max_size=6), st.integers(1, 8))
def test_can_stop_means_the_sure_outcome_is_settled(counts, p):
    R = 8
    made = sum(counts)
    if made > R:
        return
    remaining, n_max = R - made, max(counts, default=0)
    reachable = n_max + remaining >= p  # put every remaining answer on the current mode
    guaranteed = n_max >= p
    assert can_stop(counts, R=R, p_star=p) == (made == R or guaranteed or not reachable)
