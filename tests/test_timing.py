"""The measurement core: the round scheduler on a fake machine, drift, and the statistics of samples.

Every test runs on fake time (`FakeMachine`): nothing here depends on how fast or how loaded the machine
running the tests is. The one real-clock test (`harness_overhead`) asserts only counts and ordering.
"""

from __future__ import annotations

import gc
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sst

from studylib.bench import timing
from studylib.bench.timing import STOP_BUDGET, STOP_MAX_ROUNDS, STOP_PRECISION
from studylib.stats import speedups, stats, variance

# ---------------------------------------------------------------------------------------------------
# A fake machine: a clock that moves only when a variant is called, with an optional drifting speed.
# ---------------------------------------------------------------------------------------------------


class FakeMachine:
    """A fake clock and the variants that run on it.

    A call of a variant advances the clock by its cost × `factor(k)` (k: calls so far on the machine, so
    drift can be laid out in phases of many calls) × a lognormal noise of `noise` sigma, and × `spike`
    with probability `spike_p` (a neighbour's burst). Every call is logged as (name, gc enabled).
    """

    def __init__(self, factor=None, *, noise=0.0, spike_p=0.0, spike=3.0, seed=0):
        self.now = 0.0
        self.factor = factor or (lambda k: 1.0)
        self.noise, self.spike_p, self.spike = noise, spike_p, spike
        self.rng = np.random.default_rng(seed)
        self.log: list[tuple[str, bool]] = []

    def __call__(self) -> float:
        return self.now

    def variant(self, name, cost, *, fail_at=None, exc=ValueError):
        """A callable costing `cost` seconds per call: a number, a list (cycled) or a function of the call index.

        With `fail_at`, its call of that index (0-based, warm-up included) raises `exc` instead.
        """
        if callable(cost):
            cost_of = cost
        elif isinstance(cost, (list, tuple)):
            cost_of = lambda i: cost[i % len(cost)]  # noqa: E731
        else:
            cost_of = lambda i: cost  # noqa: E731
        counter = itertools.count()

        def call():
            i = next(counter)
            if i == fail_at:
                raise exc(f"{name} failed on call {i}")
            t = cost_of(i) * self.factor(len(self.log))
            if self.noise:
                t *= math.exp(self.rng.normal(0.0, self.noise))
            if self.spike_p and self.rng.random() < self.spike_p:
                t *= self.spike
            self.log.append((name, gc.isenabled()))
            self.now += t
            return i

        return call

    def names(self, start=0) -> list[str]:
        return [n for n, _ in self.log[start:]]


def phases(spec):
    """factor(k) for drift in phases: `spec` is [(calls, factor), …]; the last phase lasts for ever."""
    ends = np.cumsum([n for n, _ in spec])
    factors = [f for _, f in spec]

    def factor(k):
        return factors[min(int(np.searchsorted(ends, k, side="right")), len(factors) - 1)]

    return factor


def random_drift(seed, *, calls=2000):
    """A drifting machine's factor: phases of 15–80 calls at a speed between 0.8 and 1.25, times a slow ramp."""
    rng = np.random.default_rng(seed)
    spec, total = [], 0
    while total < calls:
        n = int(rng.integers(15, 80))
        spec.append((n, float(np.exp(rng.uniform(np.log(0.8), np.log(1.25))))))
        total += n
    step = phases(spec)
    phase0 = rng.uniform(0, 2 * np.pi)
    return lambda k: float(np.clip(step(k) * (1 + 0.08 * np.sin(phase0 + 2 * np.pi * k / 400)), 0.8, 1.25))


def row(samples, group_id="g", rep=0):
    """A results row as the sweep writes it: per-round samples with replicate and round ids."""
    return {"samples_s": list(samples), "sample_rep": [rep] * len(samples),
            "sample_round": list(range(len(samples))), "group_id": group_id}


def covers(s, value) -> bool:
    return s.ci_low <= value <= s.ci_high


# ---------------------------------------------------------------------------------------------------
# 1. The round scheduler.
# ---------------------------------------------------------------------------------------------------


def test_every_round_calls_every_variant_once_in_a_fresh_random_order():
    """Each round is a permutation of the variants; the order changes between rounds; one sample per round."""
    m = FakeMachine()
    calls = {n: m.variant(n, 0.01) for n in "ABC"}
    r = timing.measure_rounds(calls, warmup_calls=2, min_rounds=60, max_rounds=60, target_ci_pct=0.0,
                              budget_s=1e9, clock=m)
    assert r.rounds == 60 and all(len(xs) == 60 for xs in r.samples.values())
    assert m.names()[:6] == ["A", "A", "B", "B", "C", "C"]  # warm-up: per variant, before any round
    timed = m.names(6)
    assert len(timed) == 3 * 60
    rounds = [tuple(timed[i:i + 3]) for i in range(0, len(timed), 3)]
    assert all(sorted(rd) == ["A", "B", "C"] for rd in rounds)
    assert len(set(rounds)) == 6  # every order shows up over 60 rounds
    firsts = [rd[0] for rd in rounds]
    assert all(firsts.count(n) >= 10 for n in "ABC")  # no variant is always first (or last)


def test_round_order_is_reproducible_from_the_seed():
    """The same seed gives the same orders; another seed gives other orders."""

    def order(seed):
        m = FakeMachine()
        timing.measure_rounds({n: m.variant(n, 0.01) for n in "ABCD"}, warmup_calls=0, min_rounds=20,
                              max_rounds=20, target_ci_pct=0.0, seed=seed, clock=m)
        return m.names()

    assert order(1) == order(1)
    assert order(1) != order(2)


def test_warmup_calls_are_untimed():
    """Warm-up calls (here 100× slower) never reach the samples."""
    m = FakeMachine()
    calls = {"A": m.variant("A", [1.0] * 3 + [0.01] * 97), "B": m.variant("B", [2.0] * 3 + [0.02] * 97)}
    r = timing.measure_rounds(calls, warmup_calls=3, min_rounds=10, max_rounds=10, target_ci_pct=0.0,
                              budget_s=1e9, clock=m)
    assert r.warmup_calls == 3
    assert r.samples["A"] == pytest.approx([0.01] * 10)
    assert r.samples["B"] == pytest.approx([0.02] * 10)
    assert len(m.log) == 2 * 3 + 2 * 10
    assert r.elapsed_s == pytest.approx(10 * 0.03)  # the warm-up is not in the elapsed time either


def test_first_call_is_timed_alone():
    """first_call runs the callable once and times only that call; the rounds after it never see it."""
    m = FakeMachine()
    fn = m.variant("A", [5.0] + [0.01] * 99)  # the first call compiles
    out, seconds = timing.first_call(fn, clock=m)
    assert out == 0 and seconds == pytest.approx(5.0) and len(m.log) == 1
    r = timing.measure_rounds({"A": fn}, warmup_calls=1, min_rounds=5, max_rounds=5, clock=m)
    assert max(r.samples["A"]) == pytest.approx(0.01)


def test_short_calls_are_timed_in_blocks():
    """A call shorter than block_s is repeated within its turn; the sample is the time per call."""
    m = FakeMachine()
    tiny, big = 2.0 ** -13, 2.0 ** -4  # exact in binary: block = 2**-7 / 2**-13 = 64 calls
    calls = {"tiny": m.variant("tiny", tiny), "big": m.variant("big", big)}
    r = timing.measure_rounds(calls, warmup_calls=2, min_rounds=5, max_rounds=5, target_ci_pct=0.0,
                              block_s=2.0 ** -7, budget_s=1e9, clock=m)
    assert r.block == {"tiny": 64, "big": 1}
    assert r.samples["tiny"] == pytest.approx([tiny] * 5)
    assert r.samples["big"] == pytest.approx([big] * 5)
    names = m.names()  # a block of more than one call starts with one untimed lead-in call; the first block of each
    assert names.count("tiny") == 2 + 6 * (1 + 64) and names.count("big") == 2 + 1 + 5  # variant sizes it again
    timed = names[4:]  # a block runs within its turn: the tiny calls of a round are contiguous
    runs = [(k, len(list(g))) for k, g in itertools.groupby(timed)]
    assert all(n == 1 + 64 for k, n in runs if k == "tiny")


def cold_variant(m: FakeMachine, name: str, cost: float, cold: float):
    """A variant on `m` whose data the other variants evict: a call right after another variant's costs `cold` times
    more."""
    return m.variant(name, lambda i: cost * (cold if m.log and m.log[-1][0] != name else 1.0))


def test_a_block_is_timed_warm_whatever_its_size():
    """Two copies of one call and a slower call, on a machine where the first call after a switch runs 50% slower:
    every sample is the warm cost, whether a block holds 16 or 4 calls (without the lead-in each block's first call
    would be charged the 50%, more per call the smaller the block)."""
    m = FakeMachine()
    fast, slow = 2.0 ** -10, 2.0 ** -8
    calls = {name: cold_variant(m, name, cost, 1.5) for name, cost in (("A", fast), ("A-aa", fast), ("B", slow))}
    r = timing.measure_rounds(calls, warmup_calls=3, min_rounds=6, max_rounds=6, target_ci_pct=0.0,
                              block_s=2.0 ** -6, budget_s=1e9, clock=m)
    assert r.block == {"A": 16, "A-aa": 16, "B": 4}
    assert r.samples["A"] == pytest.approx([fast] * 6) and r.samples["A-aa"] == pytest.approx([fast] * 6)
    assert r.samples["B"] == pytest.approx([slow] * 6)


def test_the_block_is_sized_by_the_fastest_warmup_call():
    """A cold first warm-up call (10× slower) does not shrink the block: the fastest warm-up call sizes it."""
    m = FakeMachine()
    cost = 2.0 ** -10
    r = timing.measure_rounds({"A": m.variant("A", [10 * cost] + [cost] * 10_000)}, warmup_calls=2, min_rounds=2,
                              max_rounds=2, block_s=2.0 ** -6, budget_s=1e9, clock=m)
    assert r.block == {"A": 16}


def test_block_calibration_needs_no_warmup_and_is_capped():
    """With warmup_calls=0 one untimed call still sizes the block; the block never exceeds MAX_BLOCK."""
    m = FakeMachine()
    r = timing.measure_rounds({"A": m.variant("A", 1e-9)}, warmup_calls=0, min_rounds=2, max_rounds=2,
                              block_s=1.0, budget_s=1e9, clock=m)
    assert r.block == {"A": timing.MAX_BLOCK}
    # the untimed steady-state block and each timed one, each after its untimed lead-in call
    assert len(m.log) == 1 + (1 + r.rounds) * (1 + timing.MAX_BLOCK)


def test_the_block_is_sized_again_at_steady_state():
    """Warm-up calls 4× slower than steady state (TorchScript's profiling runs) would size a block of 4 calls that
    lasts a quarter of block_s; the untimed steady-state block sizes it again at 16, and no sample holds a slow
    call."""
    m = FakeMachine()
    cost = 2.0 ** -10
    r = timing.measure_rounds({"A": m.variant("A", [4 * cost] * 3 + [cost] * 10_000)}, warmup_calls=3,
                              min_rounds=3, max_rounds=3, block_s=2.0 ** -6, budget_s=1e9, clock=m)
    assert r.block == {"A": 16}
    assert r.samples["A"] == pytest.approx([cost] * 3)
    assert len(m.log) == 3 + (1 + 4) + 3 * (1 + 16)


def test_a_variant_failing_in_the_steady_state_block_is_a_result():
    """A call that raises while the blocks are sized again drops its variant from the rounds, reported in
    `failed`, and the other variants are timed as usual."""
    m = FakeMachine()
    cost = 2.0 ** -10
    good = m.variant("A", cost)
    seen = []

    def flaky():
        seen.append(1)
        if len(seen) > 2:  # the warm-up passes; the steady-state block raises
            raise RuntimeError("out of memory")

    r = timing.measure_rounds({"A": good, "B": flaky}, warmup_calls=2, min_rounds=3, max_rounds=3,
                              block_s=2.0 ** -6, budget_s=1e9, clock=m)
    assert set(r.failed) == {"B"} and "out of memory" in str(r.failed["B"])
    assert list(r.samples) == ["A"] and r.samples["A"] == pytest.approx([cost] * 3)


def test_stops_on_precision_with_steady_times():
    """Steady, equal-cost variants meet the target at the first check (min_rounds)."""
    m = FakeMachine(noise=0.001, seed=1)
    calls = {"A": m.variant("A", 0.01), "B": m.variant("B", 0.02)}
    r = timing.measure_rounds(calls, baseline="A", min_rounds=10, max_rounds=500, target_ci_pct=1.0,
                              budget_s=1e9, clock=m)
    assert r.stop_reason == STOP_PRECISION and r.rounds == 10
    assert timing.precise_enough(r.samples, "A", 1.0)


def test_stops_on_budget_with_very_noisy_times():
    """Noise that keeps the CI wide runs until the budget is spent, stopping on the round that crossed it."""
    m = FakeMachine(noise=1.0, seed=2)
    calls = {"A": m.variant("A", 0.01), "B": m.variant("B", 0.01)}
    r = timing.measure_rounds(calls, baseline="A", min_rounds=5, max_rounds=100_000, target_ci_pct=0.01,
                              budget_s=2.0, clock=m)
    assert r.stop_reason == STOP_BUDGET
    per_round = np.asarray(r.samples["A"]) + np.asarray(r.samples["B"])
    assert r.elapsed_s == pytest.approx(per_round.sum())
    assert per_round.sum() >= 2.0 > per_round[:-1].sum()


def test_stops_at_max_rounds():
    """With budget to spare and a target never met, exactly max_rounds rounds are taken."""
    m = FakeMachine(noise=1.0, seed=3)
    r = timing.measure_rounds({"A": m.variant("A", 0.01), "B": m.variant("B", 0.01)}, min_rounds=5,
                              max_rounds=40, target_ci_pct=0.01, budget_s=1e9, clock=m)
    assert r.stop_reason == STOP_MAX_ROUNDS and r.rounds == 40


def test_min_rounds_are_taken_even_when_precise_earlier():
    """Identical samples are precise from the start, yet min_rounds rounds are taken."""
    m = FakeMachine()
    r = timing.measure_rounds({"A": m.variant("A", 0.01)}, min_rounds=25, max_rounds=500, clock=m)
    assert r.stop_reason == STOP_PRECISION and r.rounds == 25


def test_min_rounds_are_taken_past_the_budget():
    """A budget overrun (below the 4× bail-out) does not cut the minimum of rounds."""
    m = FakeMachine()
    r = timing.measure_rounds({"A": m.variant("A", [1.0, 1.1, 0.9])}, warmup_calls=0, min_rounds=7,
                              max_rounds=100, target_ci_pct=0.01, budget_s=2.0, clock=m)
    assert r.rounds == 7 and r.stop_reason == STOP_BUDGET and r.elapsed_s == pytest.approx(7.0)


def test_far_past_the_budget_min_rounds_give_way():
    """A call far slower than planned (elapsed ≥ 4× budget) stops early, but not before 6 rounds."""
    m = FakeMachine()
    r = timing.measure_rounds({"A": m.variant("A", 1.0)}, warmup_calls=0, min_rounds=50, max_rounds=100,
                              budget_s=0.5, clock=m)
    assert r.stop_reason == STOP_BUDGET
    assert 6 <= r.rounds < 50 and r.elapsed_s >= 4 * 0.5


def test_min_time_is_respected():
    """Rounds go on until min_time_s has passed even when precise and past min_rounds."""
    m = FakeMachine()
    cost = 2.0 ** -7  # two variants: 2**-6 s per round, exactly 64 rounds per second
    r = timing.measure_rounds({"A": m.variant("A", cost), "B": m.variant("B", cost)}, min_rounds=5,
                              max_rounds=1000, min_time_s=1.0, budget_s=1e9, clock=m)
    assert r.stop_reason == STOP_PRECISION and r.rounds == 64 and r.elapsed_s == pytest.approx(1.0)


def test_a_failing_variant_is_dropped_and_the_others_go_on():
    """A call raising mid-run puts its variant in `failed`; the rest keep sampling to the end."""
    m = FakeMachine(noise=0.01)
    calls = {"A": m.variant("A", 0.01), "bad": m.variant("bad", 0.01, fail_at=2 + 3),
             "B": m.variant("B", 0.02)}
    r = timing.measure_rounds(calls, baseline="A", warmup_calls=2, min_rounds=30, max_rounds=30,
                              target_ci_pct=0.0, budget_s=1e9, clock=m)
    assert set(r.failed) == {"bad"} and isinstance(r.failed["bad"], ValueError)
    assert set(r.samples) == {"A", "B"}
    assert len(r.samples["A"]) == len(r.samples["B"]) == 30 and r.stop_reason == STOP_MAX_ROUNDS
    assert m.names().count("bad") == 2 + 3  # never called again after it raised


def test_a_variant_failing_in_warmup_is_never_timed():
    """A failure during warm-up (here of the baseline) leaves the other variants to be timed as usual."""
    m = FakeMachine()
    calls = {"base": m.variant("base", 0.01, fail_at=0, exc=RuntimeError), "B": m.variant("B", 0.01)}
    r = timing.measure_rounds(calls, baseline="base", min_rounds=10, max_rounds=50, clock=m)
    assert set(r.failed) == {"base"} and isinstance(r.failed["base"], RuntimeError)
    assert list(r.samples) == ["B"] and r.rounds == 10 and r.stop_reason == STOP_PRECISION


def test_gc_is_off_inside_timed_calls_and_back_on_after():
    """Every timed call sees the collector disabled; it is enabled again on return, also after an error."""
    assert gc.isenabled()
    m = FakeMachine()
    calls = {"A": m.variant("A", 0.01), "B": m.variant("B", 0.01, fail_at=4)}
    timing.measure_rounds(calls, warmup_calls=2, min_rounds=10, max_rounds=10, target_ci_pct=0.0, clock=m)
    assert gc.isenabled()
    timed = m.log[4:]
    assert len(timed) == 10 + 2 and not any(enabled for _, enabled in timed)

    m = FakeMachine()  # an exception that is not caught (Ctrl-C) still re-enables the collector
    with pytest.raises(KeyboardInterrupt):
        timing.measure_rounds({"A": m.variant("A", 0.01, fail_at=3, exc=KeyboardInterrupt)}, warmup_calls=1,
                              min_rounds=10, clock=m)
    assert gc.isenabled()


def test_precise_enough_checks_medians_and_paired_speedups():
    """Medians precise but per-round ratios scattered: precise without a baseline, not with one."""
    rng = np.random.default_rng(4)
    tight = list(1 + rng.uniform(-1e-4, 1e-4, 55))
    spread = list(rng.permutation(np.concatenate([np.linspace(0.5, 0.9, 22), np.linspace(1.1, 1.5, 23)])))
    a = tight + spread  # both medians sit in the tight cluster (55% of the values) …
    b = spread + tight  # … but 90% of the rounds pair a tight value with a spread one
    samples = {"A": a, "B": b}
    assert timing.precise_enough(samples, None, 1.0)
    assert not timing.precise_enough(samples, "A", 1.0)
    # A common drift: the ratio is exact, the medians are not.
    ramp = list(np.linspace(1.0, 1.5, 50))
    drifting = {"A": ramp, "B": [2 * x for x in ramp]}
    assert not timing.precise_enough(drifting, "A", 1.0)
    assert timing.precise_enough({"A": [1.0] * 10, "B": [2.0] * 10}, "A", 0.1)


# ---------------------------------------------------------------------------------------------------
# 2. Drift: interleaved rounds recover the true ratio; timing A then B does not.
# ---------------------------------------------------------------------------------------------------

TRUE_RATIO = 1 / 1.1  # speedup(A, B) = time of A / time of B; B costs 1.1× A


def _interleaved(machine, seed, **kw):
    calls = {"A": machine.variant("A", 0.010), "B": machine.variant("B", 0.011)}
    opts = dict(baseline="A", warmup_calls=2, min_rounds=20, max_rounds=150, target_ci_pct=0.5, budget_s=1e9,
                seed=seed, clock=machine)
    return timing.measure_rounds(calls, **{**opts, **kw})


def test_interleaved_rounds_recover_the_true_ratio_on_a_drifting_machine():
    """THE KEY TEST. Speed phases between 0.8× and 1.25× (plus a slow ramp, noise and spikes): the paired
    speed-up's CI holds the true ratio on ≥ 9 of 10 machines (10 with these seeds; a 95% CI may miss one),
    and is always narrower than the unpaired CI of the same samples: the drift cancels round by round."""
    hits, narrower = 0, 0
    for seed in range(10):
        m = FakeMachine(random_drift(seed), noise=0.02, spike_p=0.02, seed=100 + seed)
        r = _interleaved(m, seed)
        a, b = r.samples["A"], r.samples["B"]
        assert max(a) / min(a) > 1.3  # the machine did drift under the measurement
        s = variance.speedup(row(a), row(b))
        assert s.paired and s.n == len(a)
        hits += covers(s, TRUE_RATIO)
        unpaired = variance.speedup(row(a, "g1"), row(b, "g2"))
        narrower += (s.ci_high - s.ci_low) < (unpaired.ci_high - unpaired.ci_low)
    assert hits >= 9
    assert narrower == 10


def test_timing_one_variant_after_the_other_confounds_drift():
    """The old design: all of A's samples, then all of B's. The machine speeds up (1.25× → 0.8×) right
    between the two blocks; the unpaired CI excludes the true ratio and even says B is faster. The same
    machine timed in interleaved rounds (the step now falls mid-run) gets it right."""
    n, warm = 60, 2
    step = [(warm + n, 1.25), (1, 0.8)]  # the neighbour leaves after warm + n calls

    m = FakeMachine(phases(step), noise=0.02, seed=7)
    opts = dict(warmup_calls=warm, min_rounds=n, max_rounds=n, target_ci_pct=0.0, budget_s=1e9, clock=m)
    ra = timing.measure_rounds({"A": m.variant("A", 0.010)}, **opts)
    rb = timing.measure_rounds({"B": m.variant("B", 0.011)}, **opts)
    assert ra.rounds == rb.rounds == n
    seq = variance.speedup(row(ra.samples["A"], "run-A"), row(rb.samples["B"], "run-B"))
    assert not seq.paired
    assert not covers(seq, TRUE_RATIO)
    assert seq.ci_low > 1  # the wrong conclusion: B looks faster than A
    assert seq.ratio == pytest.approx(1.25 / (0.8 * 1.1), rel=0.05)

    m = FakeMachine(phases([(2 * warm + n, 1.25), (1, 0.8)]), noise=0.02, seed=7)
    r = _interleaved(m, seed=0, min_rounds=2 * n, max_rounds=2 * n, target_ci_pct=0.0)
    inter = variance.speedup(row(r.samples["A"]), row(r.samples["B"]))
    assert inter.paired and covers(inter, TRUE_RATIO) and inter.ci_high < 1


def test_a_a_on_a_drifting_machine_finds_no_difference():
    """Two identical variants interleaved on 20 drifting machines: the paired CI holds 1 in ≥ 18 of them."""
    misses = 0
    for seed in range(20):
        m = FakeMachine(random_drift(1000 + seed), noise=0.02, spike_p=0.02, seed=seed)
        r = timing.measure_rounds({"A": m.variant("A", 0.01), "A'": m.variant("A'", 0.01)}, baseline="A",
                                  min_rounds=20, max_rounds=150, target_ci_pct=0.5, budget_s=1e9, seed=seed,
                                  clock=m)
        s = variance.speedup(row(r.samples["A"]), row(r.samples["A'"]))
        assert s.paired
        misses += not covers(s, 1.0)
    assert misses <= 2


# ---------------------------------------------------------------------------------------------------
# 3. Statistics.
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, j, coverage", [(5, 1, 0.9375), (6, 1, 1 - 2 / 64), (10, 2, 1 - 22 / 1024),
                                            (20, 6, 1 - 2 * sst.binom.cdf(5, 20, 0.5))])
def test_order_stat_ci_known_ranks(n, j, coverage):
    """n=5: [min, max] at 93.75%; n=10: 2nd and 9th (97.85%); n=20: 6th and 15th (95.86%)."""
    x = np.random.default_rng(n).permutation(np.arange(1.0, n + 1))  # the k-th order statistic is k
    lo, hi, cov = stats.order_stat_ci(x)
    assert (lo, hi) == (j, n + 1 - j)
    assert cov == pytest.approx(coverage)


def test_order_stat_ci_ranks_are_the_tightest_at_95_percent():
    """For n up to 300: coverage ≥ 95% (from n=6), and moving one rank inwards would fall below it."""
    for n in range(6, 301):
        lo, hi, cov = stats.order_stat_ci(np.arange(1.0, n + 1))
        j = int(lo)
        assert hi == n + 1 - j
        assert cov >= 0.95 and cov == pytest.approx(1 - 2 * sst.binom.cdf(j - 1, n, 0.5))
        assert 1 - 2 * sst.binom.cdf(j, n, 0.5) < 0.95


def test_order_stat_ci_small_inputs():
    """One value: a point with no coverage; none: NaNs."""
    assert stats.order_stat_ci([3.0]) == (3.0, 3.0, 0.0)
    lo, hi, cov = stats.order_stat_ci([])
    assert math.isnan(lo) and math.isnan(hi) and cov == 0.0


def test_order_stat_ci_empirical_coverage_on_lognormal_samples():
    """2000 lognormal samples of n=10: the CI holds the true median exp(mu) in ≥ 95% of them."""
    rng = np.random.default_rng(5)
    mu, sigma = math.log(0.01), 0.5
    draws = rng.lognormal(mu, sigma, size=(2000, 10))
    hits = 0
    for x in draws:
        lo, hi, _ = stats.order_stat_ci(x)
        hits += lo <= math.exp(mu) <= hi
    assert hits / len(draws) >= 0.95


def test_median_ci_with_replicates_spans_both_levels():
    """Two replicates at 1.0 and 1.2: the hierarchical CI is wider than the pooled one and spans both."""
    rng = np.random.default_rng(6)
    r0 = rng.normal(1.0, 0.01, 30)
    r1 = rng.normal(1.2, 0.01, 30)
    x = np.concatenate([r0, r1])
    reps = [0] * 30 + [1] * 30
    lo1, hi1 = stats.median_ci(x)
    lo2, hi2 = stats.median_ci(x, reps)
    assert (hi2 - lo2) > (hi1 - lo1)
    assert lo2 <= np.median(r0) and hi2 >= np.median(r1)
    assert stats.median_ci(x, reps) == (lo2, hi2)  # reproducible (seeded)
    assert stats.median_ci(x, [0] * 60) == (lo1, hi1)  # one replicate: the order-statistic interval


def test_hierarchical_median_draws():
    """Replicates are drawn whole, then values within: two constant replicates give medians 1, 1.5, 2."""
    draws = stats.hierarchical_median_draws([np.ones(5), 2 * np.ones(5)], n_resamples=4000, seed=1)
    assert draws.shape == (4000,)
    values, counts = np.unique(draws, return_counts=True)
    assert list(values) == [1.0, 1.5, 2.0]
    assert counts / 4000 == pytest.approx([0.25, 0.5, 0.25], abs=0.03)
    uneven = stats.hierarchical_median_draws([np.array([1.0, 2.0]), np.linspace(0, 3, 50)], seed=2)
    assert not np.isnan(uneven).any() and uneven.min() >= 0 and uneven.max() <= 3
    again = stats.hierarchical_median_draws([np.array([1.0, 2.0]), np.linspace(0, 3, 50)], seed=2)
    assert np.array_equal(uneven, again)


def test_speedup_paired_is_the_median_of_per_round_ratios():
    """Rows of one group: the ratio is the median of base/cand per round, with a CI around it."""
    rng = np.random.default_rng(7)
    drift = np.linspace(1.0, 1.5, 40)
    base = drift * 0.02 * np.exp(rng.normal(0, 0.01, 40))
    cand = drift * 0.01 * np.exp(rng.normal(0, 0.01, 40))
    s = variance.speedup(row(base), row(cand))
    assert s.paired and s.n == 40
    assert s.ratio == pytest.approx(float(np.exp(np.median(np.log(base / cand)))))
    assert s.ci_low <= s.ratio <= s.ci_high and covers(s, 2.0) and s.ci_low > 1
    assert s.ci_high / s.ci_low < 1.03  # the 50% drift cancels round by round
    ratio, lo, hi = s
    assert (ratio, lo, hi) == (s.ratio, s.ci_low, s.ci_high)


def test_speedup_falls_back_to_unpaired_across_groups():
    """Different group ids (or no rounds): the ratio of medians, its log SE the two medians' in quadrature."""
    rng = np.random.default_rng(8)
    base, cand = rng.normal(2.0, 0.05, 50), rng.normal(1.0, 0.03, 50)
    s = variance.speedup(row(base, "g1"), row(cand, "g2"))
    assert not s.paired and s.n == 50
    assert s.ratio == pytest.approx(np.median(base) / np.median(cand))
    assert s.ci_low <= s.ratio <= s.ci_high and covers(s, 2.0)
    se = [np.sqrt(np.pi / 2 / len(x)) * 1.4826 * np.median(np.abs(np.log(x) - np.median(np.log(x))))
          * np.sqrt(len(x) / (len(x) - 1)) for x in (base, cand)]
    assert s.se == pytest.approx(np.hypot(*se))
    no_rounds = variance.speedup({"samples_s": list(base)}, {"samples_s": list(cand)})
    assert not no_rounds.paired and no_rounds.ratio == pytest.approx(s.ratio)


def test_geomean_speedup():
    """Identical pairs: 1 with a CI holding 1. Pairs with ratios 2 and 8: 4."""
    rng = np.random.default_rng(9)
    x = rng.lognormal(np.log(0.01), 0.05, 30)
    y = rng.lognormal(np.log(0.02), 0.05, 30)
    same = speedups.geomean_of([(row(x), row(x)), (row(y), row(y))])
    assert same.ratio == pytest.approx(1.0) and covers(same, 1.0) and same.paired and same.n == 2

    noise = lambda: np.exp(rng.normal(0, 0.02, 30))  # noqa: E731
    pairs = [(row(2 * x * noise()), row(x * noise())), (row(8 * y * noise()), row(y * noise()))]
    g = speedups.geomean_of(pairs)
    assert g.ratio == pytest.approx(4.0, rel=0.02) and covers(g, 4.0) and g.paired
    assert g.ratio == pytest.approx(math.sqrt(variance.speedup(*pairs[0]).ratio * variance.speedup(*pairs[1]).ratio))

    unpaired = speedups.geomean_of([(row(2 * x * noise(), "a"), row(x * noise(), "b")),
                                         (row(8 * y * noise(), "c"), row(y * noise(), "d"))])
    assert not unpaired.paired and unpaired.ratio == pytest.approx(4.0, rel=0.05) and covers(unpaired, 4.0)
    empty = speedups.geomean_of([])
    assert math.isnan(empty.ratio) and empty.n == 0


def test_drift_flags_a_ramp_and_not_noise():
    """+30% over 40 samples is flagged with its size; iid noise is not; steps between replicates are not drift."""
    rng = np.random.default_rng(10)
    ramp = np.linspace(1.0, 1.3, 40) * np.exp(rng.normal(0, 0.01, 40))
    d = stats.drift(ramp)
    assert d["drift"] and d["drift_tau"] > 0.5 and d["drift_p"] < stats.DRIFT_P
    assert d["drift_pct"] == pytest.approx(0.3 / np.median(ramp), rel=0.1)

    iid = stats.drift(np.exp(rng.normal(0, 0.05, 40)))
    assert not iid["drift"] and iid["drift_p"] > stats.DRIFT_P

    levels = np.concatenate([np.exp(rng.normal(0, 0.01, 30)), 1.2 * np.exp(rng.normal(0, 0.01, 30))])
    assert stats.drift(levels)["drift"]  # one process, a step: drift
    assert not stats.drift(levels, [0] * 30 + [1] * 30)["drift"]  # two processes at two levels: not drift

    assert stats.drift([1.0] * 10) == {"drift_tau": 0.0, "drift_p": 1.0, "drift_pct": 0.0, "drift": False}
    assert stats.drift([1.0, 2.0, 3.0])["drift_tau"] is None  # too few samples to tell


# ---------------------------------------------------------------------------------------------------
# 4. Row statistics and the harness's own overhead.
# ---------------------------------------------------------------------------------------------------


def test_row_statistics_fields():
    """The fields every results row carries agree with numpy and with the CI and drift functions."""
    x = [0.9, 1.0, 1.1, 1.2, 5.0, 1.05, 0.95, 1.0, 1.02, 0.98]
    s = timing.row_statistics(x)
    assert set(s) == {"n", "median_s", "mean_s", "p90_s", "p99_s", "iqr_s", "cv", "ci_run_low_s", "ci_run_high_s",
                      "drift_tau", "drift_p", "drift_pct", "drift"}
    assert s["n"] == 10
    assert s["median_s"] == pytest.approx(np.median(x)) and s["mean_s"] == pytest.approx(np.mean(x))
    assert s["p90_s"] == pytest.approx(np.percentile(x, 90)) and s["p99_s"] == pytest.approx(np.percentile(x, 99))
    assert s["iqr_s"] == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))
    assert s["cv"] == pytest.approx(np.std(x, ddof=1) / np.mean(x))
    assert (s["ci_run_low_s"], s["ci_run_high_s"]) == stats.median_ci(x)
    assert s["ci_run_low_s"] <= s["median_s"] <= s["ci_run_high_s"] < 5.0  # not dragged by the outlier
    assert s["drift"] is False

    ramp = list(np.linspace(1.0, 1.3, 40))
    assert timing.row_statistics(ramp)["drift"] is True
    two = timing.row_statistics(ramp, [0] * 20 + [1] * 20)
    assert two["n"] == 40 and (two["ci_run_low_s"], two["ci_run_high_s"]) == stats.median_ci(ramp, [0] * 20 + [1] * 20)


def test_harness_overhead_is_measured_on_enough_rounds():
    """The real no-op is timed on ≥ 200 rounds; its median is non-negative and inside its CI."""
    o = timing.harness_overhead(budget_s=0.05)
    assert o.n >= 200
    assert 0 <= o.ci_low <= o.median <= o.ci_high
