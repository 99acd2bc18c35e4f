"""The one number formatter (core/numbers.py): a speed-up's digits follow its CI's half-width, a range collapses where
both ends print alike, a CI that is not finite leaves the ratio alone, calls that never pay back say 'never'."""

import math

import pytest

from studylib.core import numbers


@pytest.mark.parametrize(("low", "high", "digits"), [
    (1.80, 1.95, 2),  # half-width 0.075: the usual case
    (1.0, 1.01, 2),  # 0.005: still 2
    (1.0, 2.0, 2),  # 0.5: still 2
    (1.0, 2.02, 1),  # 0.51: a wide CI
    (1.426, 1.432, 3),  # 0.003: a very tight CI
    (math.nan, 1.2, 2), (1.1, math.inf, 2), (None, None, 2),  # no finite CI: 2
])
def test_decimals_follow_the_ci_half_width(low, high, digits):
    assert numbers.decimals(low, high) == digits


def test_a_speed_up_with_its_ci_at_the_decimals_the_ci_supports():
    assert numbers.fmt(1.874, 1.80, 1.95) == "1.87× (95% CI 1.80–1.95)"
    assert numbers.fmt(1.874, 1.80, 1.95, brief=True) == "1.87× (1.80–1.95)"
    assert numbers.fmt(1.4291, 1.4262, 1.4318) == "1.429× (95% CI 1.426–1.432)"
    assert numbers.fmt(3.14, 2.1, 4.3) == "3.1× (95% CI 2.1–4.3)"
    assert numbers.fmt(2.13, 2.01, 2.25, unit="") == "2.13 (95% CI 2.01–2.25)"
    assert numbers.fmt(1234.4, digits=0) == "1,234×"


@pytest.mark.parametrize(("low", "high"), [(math.nan, 1.9), (1.8, math.nan), (1.8, math.inf), (-math.inf, 1.9),
                                            (None, 1.9), (None, None)])
def test_a_ci_that_is_not_finite_prints_the_ratio_alone(low, high):
    assert numbers.fmt(1.874, low, high) == "1.87×"


def test_a_ratio_alone_takes_its_ci_decimals_and_a_ci_alone_its_own():
    assert numbers.fmt_alone(1.4291, 1.4262, 1.4318) == "1.429×"
    assert numbers.fmt_alone(1.4291) == "1.43×"
    assert numbers.fmt_ci(1.03, 1.09) == "1.03–1.09×"
    assert numbers.fmt_ci(0.9, 1.1) == "0.90–1.10×"
    assert numbers.fmt_ci(0.4, 1.6, unit="") == "0.4–1.6"


def test_a_range_collapses_where_both_ends_round_alike():
    assert numbers.fmt_span(0.931, 0.987) == "0.93–0.99×"
    assert numbers.fmt_span(1.201, 1.204) == "1.20×"
    # each end at its own CI's decimals, as its table cell prints it
    assert numbers.fmt_span((1.4291, 1.4262, 1.4318), (2.5, 1.2, 3.8)) == "1.429–2.5×"
    assert numbers.fmt_range(0.012, 0.034, ".1%") == "1.2%–3.4%"
    assert numbers.fmt_range(1.04, 1.01, ".1f", " s") == "1.0 s"
    assert numbers.fmt_range(1.04, 1.01, ".1f", " s", collapse=False) == "1.0–1.0 s"  # a CI keeps both ends


def test_calls_and_factors():
    assert numbers.fmt_calls(1203) == "1,203"
    assert numbers.fmt_calls(1) == "1"
    assert numbers.fmt_calls(math.inf) == numbers.fmt_calls(math.nan) == "never"
    assert [numbers.fmt_factor(f) for f in (1.2, 10, 0.125, 1.3)] == ["1.2×", "10×", "0.125×", "1.3×"]


def test_milliseconds_and_seconds_print_one_way():
    assert [numbers.fmt_ms(v) for v in (8.264, 137.4, 1131.2, float("nan"))] == ["8.26 ms", "137 ms", "1,131 ms", "—"]
    assert numbers.fmt_ms(None, missing="") == ""
    assert [numbers.fmt_seconds(v) for v in (14.24, 0.34, float("inf"))] == ["14.2 s", "340 ms", "—"]


def test_an_interval_names_its_level_where_it_is_not_95_percent():
    assert numbers.fmt(1.2, 1.1, 1.3) == "1.20× (95% CI 1.10–1.30)"
    assert numbers.fmt(1.2, 1.1, 1.3, level=0.99232) == "1.20× (99.2% CI 1.10–1.30)"
    assert [numbers.fmt_level(v) for v in (0.95, 0.97325, None, float("nan"))] == ["95%", "97.3%", "95%", "95%"]
