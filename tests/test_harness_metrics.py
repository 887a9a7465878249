from __future__ import annotations

import math

import pytest

from prbench.metrics import (
    accuracy,
    bootstrap_ci,
    domain_summary,
    finite_mean,
    outcomes_from_counts,
    pair_outcome,
    tie_rate,
)


def test_pair_outcome_is_strict_and_flags_missing_verdicts() -> None:
    assert pair_outcome(2.0, 1.0).correct == 1.0
    assert pair_outcome(1.0, 2.0).correct == 0.0
    tie = pair_outcome(0.5, 0.5)
    assert (tie.correct, tie.tie, tie.margin, tie.invalid) == (0.0, 1.0, 0.0, 0.0)
    bad = pair_outcome(math.nan, 1.0)
    assert (bad.correct, bad.tie, bad.invalid) == (0.0, 0.0, 1.0)
    assert math.isnan(bad.margin)
    assert pair_outcome(math.inf, 1.0).invalid == 1.0
    assert pair_outcome(3.0, 1.0).margin == 2.0


def test_accuracy_counts_ties_as_wrong() -> None:
    chosen = [1.0, 2.0, 3.0, 4.0]
    rejected = [0.0, 2.0, 5.0, 4.0]
    assert accuracy(chosen, rejected) == 0.25
    assert tie_rate(chosen, rejected) == 0.5
    assert accuracy([0.0] * 5, [0.0] * 5) == 0.0
    with pytest.raises(ValueError, match="3 chosen scores but 2"):
        accuracy([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no pairs"):
        accuracy([], [])


def test_finite_mean_skips_missing_margins() -> None:
    assert finite_mean([1.0, math.nan, 3.0]) == 2.0
    assert math.isnan(finite_mean([math.nan]))


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    values = [1.0] * 30 + [0.0] * 20
    a = bootstrap_ci(values, resamples=2000, seed=7)
    b = bootstrap_ci(values, resamples=2000, seed=7)
    c = bootstrap_ci(values, resamples=2000, seed=8)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    assert a.value == 0.6
    assert a.low < 0.6 < a.high
    # binomial standard error ~0.069: a 95% interval spans roughly +-0.14
    assert 0.4 < a.low < 0.5 and 0.7 < a.high < 0.8
    assert bootstrap_ci([1.0] * 10, resamples=100).low == 1.0
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0], confidence=1.5)


def test_outcomes_from_counts() -> None:
    assert sorted(outcomes_from_counts(2, 4)) == [0.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="inconsistent"):
        outcomes_from_counts(5, 4)


def test_domain_summary_micro_and_macro_differ_with_unequal_sizes() -> None:
    outcomes = {
        "big": outcomes_from_counts(90, 100),  # 0.9
        "small": outcomes_from_counts(2, 10),  # 0.2
    }
    summary = domain_summary(outcomes, resamples=2000, seed=1)
    assert summary.micro.value == pytest.approx(92 / 110)
    assert summary.macro.value == pytest.approx(0.55)
    assert summary.micro.n == summary.macro.n == 110
    for est in (summary.micro, summary.macro, *summary.domains.values()):
        assert est.low <= est.value <= est.high
    # the macro interval is wider: the small domain weighs half
    assert summary.macro.high - summary.macro.low > summary.micro.high - summary.micro.low


def test_domain_intervals_do_not_depend_on_other_domains() -> None:
    one = domain_summary({"a": outcomes_from_counts(7, 12)}, resamples=1000, seed=3)
    two = domain_summary(
        {"a": outcomes_from_counts(7, 12), "b": outcomes_from_counts(3, 9)},
        resamples=1000,
        seed=3,
    )
    assert one.domains["a"] == two.domains["a"]
    with pytest.raises(ValueError, match="no pairs"):
        domain_summary({"a": []})


def test_domain_interval_does_not_depend_on_its_position() -> None:
    # a domain's interval is the same whether it is summarised alone (one task) or after
    # other domains (the group), and whatever the order of the domains
    b = outcomes_from_counts(5, 11)
    alone = domain_summary({"b": b}, resamples=500, seed=3)
    second = domain_summary({"a": outcomes_from_counts(7, 12), "b": b}, resamples=500, seed=3)
    first = domain_summary({"b": b, "a": outcomes_from_counts(7, 12)}, resamples=500, seed=3)
    assert alone.domains["b"] == second.domains["b"] == first.domains["b"]
    assert first.micro == second.micro and first.macro == second.macro
