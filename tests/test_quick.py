"""studylib.quick: a reader's own callables timed with the study's rounds, replicates, A/A copy and verdict rule —
on a fake clock, so the decisions below follow from the costs the callables charge, not from this machine."""

import numpy as np
import pytest

from studylib import quick


class Clock:
    """A clock each callable advances by its own cost (with a little noise), as if it took that long."""

    def __init__(self):
        self.t = 0.0
        self.rng = np.random.default_rng(3)

    def __call__(self) -> float:
        return self.t

    def costs(self, seconds: float, out=None):
        def call():
            self.t += seconds * self.rng.normal(1, 0.01)
            return out
        return call


def test_a_callable_that_costs_half_is_faster_with_its_ci_and_the_aa_copy_stays_out_of_the_table():
    clock = Clock()
    r = quick.compare({"mine": clock.costs(0.010, np.ones(3)), "eager": clock.costs(0.020, np.ones(3))},
                      budget_s=0.5, clock=clock)
    [v] = r.verdicts.options()
    assert (v.candidate, v.baseline, v.decision) == ("mine", "eager", "faster")
    assert v.ci_low < 2.0 < v.ci_high and v.ci_low > 1.8
    t = r.table().set_index("callable")
    assert list(t.index) == ["mine", "eager"] and t.loc["eager", "decision"] == "baseline"
    assert t.loc["mine", "speed-up (95% CI)"].startswith("2.0") and t.loc["mine", "max abs diff vs baseline"] == "0.00e+00"
    assert set(r.rows.sample_rep.iloc[0]) == {0, 1, 2}  # three replicates by default
    assert "eager-aa" in r._repr_html_() and "eager-aa" not in str(r)


def test_equal_costs_are_equal_and_different_outputs_are_flagged():
    clock = Clock()
    r = quick.compare({"a": clock.costs(0.010, np.zeros(4)), "b": clock.costs(0.010, np.full(4, 0.5))},
                      baseline="b", budget_s=0.5, clock=clock)
    [v] = r.verdicts.options()
    assert v.decision == "equal"
    row = r.rows.set_index("variant").loc["a"]
    assert row.max_abs_diff == pytest.approx(0.5) and not row.parity_ok


def test_a_callable_that_fails_is_a_row_with_its_error_and_the_others_are_still_judged():
    clock = Clock()

    def broken():
        raise RuntimeError("no kernel for this shape")

    r = quick.compare({"eager": clock.costs(0.02), "mine": clock.costs(0.01), "broken": broken},
                      budget_s=0.5, clock=clock)
    t = r.table().set_index("callable")
    assert t.loc["broken", "decision"] == "error: RuntimeError: no kernel for this shape"
    assert t.loc["mine", "decision"] == "faster"


@pytest.mark.parametrize("calls, kwargs, message", [
    ({"only": lambda: 1}, {}, "at least two callables"),
    ({"a": lambda: 1, "b": lambda: 2}, {"baseline": "c"}, "baseline 'c' is not one of"),
    ({"a": lambda: 1, "a-aa": lambda: 2}, {}, "kept for the A/A copy"),
    ({"a": lambda: 1, "b": lambda: 2}, {"replicates": 0}, "replicates must be at least 1"),
])
def test_bad_input_is_one_clear_error(calls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        quick.compare(calls, **kwargs)
