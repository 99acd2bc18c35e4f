"""Why a variant is fast or slow: the machine's limits, the work a call does, and where each call sits.

Three parts, one place:

- **Limits** (`measure_peaks`): a dense matmul's rate per dtype (GFLOP/s) and a STREAM-triad-like
  kernel's memory bandwidth (GB/s), each a median over repeated calls with its order-statistic 95% CI,
  measured with the threads the profile set, once per environment fingerprint (`cached_peaks`; kept in
  env.json under "peaks").
- **Work** (`work_per_call`, `pass_work`): FLOPs of one call, counted on the eager PyTorch model with
  torch.utils.flop_counter.FlopCounterMode (matmuls, linears, bmm, convolutions: the arithmetic every
  runtime has to do for the same function), and the bytes it moves at least: every weight read once, plus
  every tensor an operator writes (views excluded) — activations written once, their re-reads assumed to
  hit the cache. Counting runs on a `meta` copy of the model (shapes only, no arithmetic); a model that
  cannot run on meta is counted once on the real one.
- **Regime** (`regime`, `roofline_table`): the roofline's attainable rate is min(peak, AI × bandwidth),
  with AI the arithmetic intensity (FLOPs per byte). A call reaching less than OVERHEAD_SHARE of what is
  attainable at its intensity is *overhead-bound* (dispatch, Python, synchronisation, small kernels: the
  time is not spent on arithmetic or on memory traffic); otherwise it is *memory-bound* where AI ×
  bandwidth is below the compute peak, else *compute-bound*.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import speedups, stats

METHOD = 1  # bump when the way limits are measured changes: cached limits of another method are re-measured
OVERHEAD_SHARE = 0.25  # below this share of the attainable rate a call is overhead-bound
MIN_SAMPLES = 10  # timed calls per kernel at least (the order-statistic CI needs 6 at 95%)
MAX_SAMPLES = 200
MATMUL_SIZES = {"cpu": (256, 2048), "cuda": (1024, 8192)}  # smallest and largest square size tried
TRIAD_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 26}  # fp32 elements per array: far beyond the last-level cache
REGIMES = ("overhead-bound", "memory-bound", "compute-bound")
UNKNOWN = "unknown"


# --- the machine's limits ------------------------------------------------------------------------------------

def budget_s(measure: dict) -> float:
    """Seconds the limits may take: the profile's minimum timing per group (min_time_s), kept within 2–12 s,
    so the smoke profile spends about 2 s and the real profiles about 10 s, once per environment."""
    return float(min(12.0, max(2.0, measure.get("min_time_s", 0.0))))


def _timed_calls(fn: Callable[[], object], sync: Callable[[], object], budget: float) -> np.ndarray:
    """Seconds per call of `fn` (device wait inside the timed region), for `budget` seconds and at least
    MIN_SAMPLES calls, after one untimed call."""
    fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MAX_SAMPLES and (len(times) < MIN_SAMPLES or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return np.asarray(times)


def _rate(times: np.ndarray, work: float, unit: float) -> dict:
    """Median rate (work per second, in `unit`s) with its 95% CI, from per-call seconds."""
    rates = work / times / unit
    lo, hi, _ = stats.order_stat_ci(rates)
    return {"median": float(np.median(rates)), "ci_low": lo, "ci_high": hi, "n": len(rates)}


def _matmul(dtype: str, device: str):
    """(make(n) → call, kernel name) for a square n × n product in `dtype`; None where there is none."""
    import torch

    if dtype == "int8" and device == "cpu":
        # What torch-int8 runs: a dynamically quantized Linear (fbgemm / onednn), activations quantized per call.
        def make(n):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                layer = torch.ao.nn.quantized.dynamic.Linear(n, n, bias_=False)
            x = torch.randn(n, n)
            return lambda: layer(x)

        return make, f"dynamic int8 Linear ({torch.backends.quantized.engine})"
    if dtype == "int8":
        def make(n):
            a = torch.randint(-128, 127, (n, n), dtype=torch.int8, device=device)
            b = torch.randint(-128, 127, (n, n), dtype=torch.int8, device=device)
            return lambda: torch._int_mm(a, b)

        return make, "torch._int_mm"
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]

    def make(n):
        # A Linear layer's product (x @ wᵀ), the models' dense kernel: on CPUs without native bf16, torch.mm
        # in bf16 takes a path ten times slower than the oneDNN one F.linear takes.
        x, w = (torch.randn(n, n, device=device).to(torch_dtype) for _ in range(2))
        return lambda: torch.nn.functional.linear(x, w)

    return make, "F.linear"


def _sized(make, sync, device: str, target_s: float):
    """The largest power-of-two size (within MATMUL_SIZES) whose call should take about `target_s` or less:
    doubled while eight times the last call's time (a doubling's cost) stays within it. (n, call)."""
    n, largest = MATMUL_SIZES[device]
    while True:
        call = make(n)
        if n >= largest or _one_call(call, sync) * 8 > target_s:
            return n, call
        n *= 2


def _one_call(call, sync) -> float:
    """Seconds of one warm call."""
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - t0


def matmul_peak(dtype: str, device: str, budget: float) -> dict:
    """Dense matmul rate of `dtype` (GFLOP/s, int8: GOP/s) with its CI, sized to the budget."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    make, kernel = _matmul(dtype, device)
    n, call = _sized(make, sync, device, budget / MIN_SAMPLES)
    rate = _rate(_timed_calls(call, sync, budget), 2.0 * n ** 3, 1e9)
    return {"gflops": rate.pop("median"), **rate, "size": n, "kernel": kernel}


def triad_bandwidth(device: str, budget: float) -> dict:
    """Memory bandwidth (GB/s) with its CI: a = b + 2·c over fp32 arrays far larger than the caches
    (two arrays read, one written per call)."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    n = TRIAD_ELEMENTS[device]
    a, b, c = torch.empty(n, device=device), torch.rand(n, device=device), torch.rand(n, device=device)
    moved = 3 * n * a.element_size()
    rate = _rate(_timed_calls(lambda: torch.add(b, c, alpha=2.0, out=a), sync, budget), moved, 1e9)
    return {"gbs": rate.pop("median"), **rate, "bytes": moved, "kernel": "triad a = b + 2c (fp32)"}


def peak_dtypes(device: str) -> tuple[str, ...]:
    """The dtypes whose matmul rate is measured: those the studies run on the device, and int8."""
    return ("fp32", "fp16", "bf16", "int8") if device == "cuda" else ("fp32", "bf16", "int8")


def measure_peaks(device: str = "cpu", *, budget: float = 2.0) -> dict:
    """The machine's limits with the threads now set: matmul rate per dtype and triad bandwidth, each with
    its 95% CI, within about `budget` seconds in all (shared evenly by the kernels)."""
    import torch

    started = time.perf_counter()
    dtypes = peak_dtypes(device)
    share = budget / (len(dtypes) + 1)
    matmul = {}
    for dtype in dtypes:
        try:
            matmul[dtype] = matmul_peak(dtype, device, share)
        except Exception as exc:  # noqa: BLE001 - a kernel the build lacks is recorded, not fatal
            matmul[dtype] = {"skipped": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    return {"method": METHOD, "device": device, "threads": torch.get_num_threads(),
            "tf32": bool(device == "cuda" and torch.backends.cuda.matmul.allow_tf32),
            "measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "matmul": matmul,
            "bandwidth": triad_bandwidth(device, share), "seconds": time.perf_counter() - started}


def cached_peaks(env: dict, previous: dict | None, *, device: str, budget: float) -> dict:
    """The limits for `env`: `previous` env.json's when it is the same environment (fingerprint), device,
    threads and method — a resumed run does not measure them again — else measured now."""
    import torch

    old = (previous or {}).get("peaks") or {}
    if ((previous or {}).get("fingerprint") == env["fingerprint"] and old.get("method") == METHOD
            and old.get("device") == device and old.get("threads") == torch.get_num_threads()):
        return old
    return measure_peaks(device, budget=budget)


def describe_peaks(peaks: dict | None) -> str:
    """The limits in one line, for the environment table."""
    if not peaks:
        return "not measured"
    parts = []
    for dtype, m in peaks["matmul"].items():
        if "skipped" in m:
            parts.append(f"{dtype} matmul skipped ({m['skipped']})")
        else:
            unit = "GOP/s" if dtype == "int8" else "GFLOP/s"
            parts.append(f"{dtype} matmul {m['gflops']:,.1f} {unit} (95% CI {m['ci_low']:,.1f}–{m['ci_high']:,.1f}; "
                         f"{m['size']}², {m['kernel']})")
    bw = peaks["bandwidth"]
    parts.append(f"memory bandwidth {bw['gbs']:,.1f} GB/s (95% CI {bw['ci_low']:,.1f}–{bw['ci_high']:,.1f}; "
                 f"{bw['kernel']}, {bw['bytes'] / 1e6:,.0f} MB per call)")
    return (" · ".join(parts) + f" — {peaks['threads']} threads, measured in {peaks['seconds']:.1f} s at "
            f"{peaks['measured_at']}")


def peak_gflops(peaks: dict | None, key: str) -> float | None:
    """The measured matmul rate for `key` (a dtype, or int8), or None where it was not measured."""
    m = ((peaks or {}).get("matmul") or {}).get(key) or {}
    return m.get("gflops")


def peak_bandwidth(peaks: dict | None) -> float | None:
    """The measured memory bandwidth (GB/s), or None where it was not measured."""
    return ((peaks or {}).get("bandwidth") or {}).get("gbs")


# --- work per call -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Work:
    """What one call computes: FLOPs, and bytes moved at least (weights read once, outputs written once)."""

    flops: int
    weight_bytes: int
    activation_bytes: int

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes


def _traffic_mode():
    """A dispatch mode summing the bytes every operator writes (outputs that are views of inputs excluded)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Traffic(TorchDispatchMode):
        written = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not any(r.alias_info is not None for r in func._schema.returns):
                self.written += sum(t.numel() * t.element_size() for t in tree_leaves(out)
                                    if isinstance(t, torch.Tensor))
            return out

    return Traffic()


def count(module, inputs: tuple) -> Work:
    """Run `module(*inputs)` once, counting its FLOPs (FlopCounterMode) and the bytes its operators write."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    weights = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    flops = FlopCounterMode(display=False)
    traffic = _traffic_mode()
    with torch.inference_mode(), flops, traffic:
        module(*inputs)
    return Work(int(flops.get_total_flops()), int(weights), int(traffic.written))


_META: dict[tuple, object] = {}


def _meta_model(name: str, dtype: str):
    """The model on the meta device (shapes only). Text models use transformers' eager attention there: its
    two matmuls are the FLOPs scaled-dot-product attention counts, and its mask code runs on meta."""
    import torch

    from . import models

    key = (name, dtype)
    if key not in _META:
        _META.clear()  # one model at a time
        attention = "eager" if models.spec(name).kind == "text" else None
        with torch.device("meta"):
            _META[key] = models.build_torch(name, dtype=dtype, device="meta", attention=attention)
    return _META[key]


_WORK: dict[tuple, Work] = {}


def work_per_call(name: str, *, dtype: str, batch_size: int, seq_len: int | None = None,
                  image_size: int | None = None, real: Callable[[], tuple] | None = None) -> Work:
    """The work of one call of model `name` on a batch of that shape, counted once per shape and cached.

    Counted on the meta device; where the model cannot run there, `real()` gives (module, inputs) of the real
    model to count on once (its values do not change the count)."""
    from . import models

    key = (name, dtype, batch_size, seq_len, image_size)
    if key not in _WORK:
        inputs = models.torch_inputs(name, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                                     dtype=dtype, device="meta")
        try:
            _WORK[key] = count(_meta_model(name, dtype), inputs)
        except Exception:
            if real is None:
                raise
            module, real_inputs = real()
            _WORK[key] = count(module, real_inputs)
    return _WORK[key]


def per_text(name: str, dtype: str, lengths: Iterable[int], real: Callable[[int], tuple] | None = None
             ) -> dict[int, Work]:
    """Work of one text of each length (batch 1). A transformer's FLOPs and activation bytes are quadratic in
    the length (projections and feed-forward grow with it, attention with its square, the head is
    constant): three counts fix the polynomial and a fourth checks it; where the check fails every length
    is counted. `real(length)` gives (module, inputs) for models that do not run on meta."""
    lengths = sorted(set(int(n) for n in lengths))

    def at(n: int) -> Work:
        return work_per_call(name, dtype=dtype, batch_size=1, seq_len=n, real=real and (lambda: real(n)))

    if len(lengths) <= 4:
        return {n: at(n) for n in lengths}
    probes = [lengths[0], lengths[len(lengths) // 2], lengths[-1]]
    check = lengths[len(lengths) // 4] if lengths[len(lengths) // 4] not in probes else lengths[1]
    works = [at(n) for n in probes]
    fits = [np.polyfit(probes, [getattr(w, f) for w in works], 2) for f in ("flops", "activation_bytes")]

    def fitted(n: int) -> Work:
        return Work(*(int(round(np.polyval(fits[0], n))), works[0].weight_bytes,
                      int(round(np.polyval(fits[1], n)))))

    truth = at(check)
    if fitted(check) != truth:
        return {n: at(n) for n in lengths}
    return {n: fitted(n) for n in lengths}


def pass_work(name: str, dtype: str, batches: Iterable[tuple[int, int]], text_lengths: Iterable[int],
              real: Callable[[int], tuple] | None = None) -> dict[str, int]:
    """Work of one pass over a data set: `batches` as (texts, padded length) pairs, `text_lengths` each
    text's own length. FLOPs and activations of a batch are its texts' (each text is computed on its own,
    padding included); weights are read once per batch. Useful FLOPs count each text at its own length."""
    batches, text_lengths = list(batches), list(text_lengths)
    works = per_text(name, dtype, [n for _, n in batches] + text_lengths, real)
    computed = sum(b * works[n].flops for b, n in batches)
    moved = sum(b * works[n].activation_bytes + works[n].weight_bytes for b, n in batches)
    return {"flops_per_call": computed, "bytes_per_call": moved,
            "useful_flops_per_call": sum(works[n].flops for n in text_lengths)}


# --- regimes -------------------------------------------------------------------------------------------------

def regime(achieved: float, intensity: float, peak: float | None, bandwidth: float | None) -> str:
    """Overhead-, memory- or compute-bound (see the module's docstring); 'unknown' without the limits or work.

    achieved and peak in GFLOP/s, intensity in FLOPs per byte, bandwidth in GB/s."""
    if not all(v is not None and np.isfinite(v) and v > 0 for v in (achieved, intensity, peak, bandwidth)):
        return UNKNOWN
    memory_roof = intensity * bandwidth
    if achieved < OVERHEAD_SHARE * min(peak, memory_roof):
        return "overhead-bound"
    return "memory-bound" if memory_roof < peak else "compute-bound"


ROOFLINE_COLUMNS = ["config_key", "model", "variant", "dtype", "batch_size", "seq_len", "image_size", "strategy",
                    "status", "median_s", "flops_per_call", "useful_flops_per_call", "bytes_per_call", "gflops",
                    "peak_of", "peak_gflops", "share_of_peak", "intensity", "attainable_gflops",
                    "share_of_attainable", "regime"]


def peak_key(variant: str, dtype: str) -> str:
    """Whose peak a row is held against: its runtime's precision (int8) where it has one, else its dtype."""
    from . import runtimes

    runtime = runtimes.REGISTRY.get(variant)
    return (runtime.precision if runtime is not None else None) or dtype


def _column(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df else pd.Series([None] * len(df), index=df.index, dtype=object)


def roofline_table(df: pd.DataFrame, peaks: dict | None) -> pd.DataFrame:
    """Per configuration: achieved GFLOP/s, its share of the row's peak, arithmetic intensity, the attainable
    rate at that intensity and the regime. Failed rows, rows without a FLOP count (measured before work was
    counted) and rows whose peak is unknown keep their place with the regime 'unknown'."""
    t = pd.DataFrame({c: _column(df, c) for c in ROOFLINE_COLUMNS[:ROOFLINE_COLUMNS.index("gflops")]}, index=df.index)
    flops = pd.to_numeric(t.flops_per_call, errors="coerce").astype(float)
    moved = pd.to_numeric(t.bytes_per_call, errors="coerce").astype(float)
    seconds = pd.to_numeric(t.median_s, errors="coerce").astype(float).where(t.status == "ok")
    t["gflops"] = flops / seconds / 1e9
    t["peak_of"] = [peak_key(v, d) for v, d in zip(t.variant, t["dtype"])]
    t["peak_gflops"] = [peak_gflops(peaks, k) for k in t.peak_of]
    t["peak_gflops"] = pd.to_numeric(t.peak_gflops, errors="coerce").astype(float)
    t["share_of_peak"] = t.gflops / t.peak_gflops
    t["intensity"] = flops / moved
    bandwidth = peak_bandwidth(peaks)
    t["attainable_gflops"] = np.minimum(t.peak_gflops, t.intensity * bandwidth) if bandwidth else np.nan
    t["share_of_attainable"] = t.gflops / t.attainable_gflops
    t["regime"] = [regime(a, i, p, bandwidth) for a, i, p in zip(t.gflops, t.intensity, t.peak_gflops)]
    return t[ROOFLINE_COLUMNS].reset_index(drop=True)


def rule_text(peaks: dict | None) -> str:
    """How a regime is read off the roofline, in one sentence (with the limits, when known)."""
    bw = peak_bandwidth(peaks)
    fp32 = peak_gflops(peaks, "fp32")
    limits = (f" Here the fp32 peak is {fp32:,.1f} GFLOP/s and the bandwidth {bw:,.1f} GB/s, so the ridge lies at "
              f"{fp32 / bw:,.1f} FLOPs per byte." if bw and fp32 else "")
    return (f"Regimes come from the roofline: attainable = min(peak of the row's dtype, arithmetic intensity × "
            f"memory bandwidth); a call below {OVERHEAD_SHARE:.0%} of its attainable rate is overhead-bound, "
            f"otherwise memory-bound where intensity × bandwidth is below the peak, else compute-bound.{limits}")


def summary_finding(rt: pd.DataFrame, peaks: dict | None) -> str:
    """Where the configurations sit: how many in each regime, and the best share of peak."""
    ok = rt[rt.status == "ok"]
    if not peaks:
        return ("**Roofline**: the machine's limits were not given to this analysis (peaks unknown), so no "
                "configuration is placed on the roofline; "
                f"{int(ok.gflops.notna().sum())} of {len(ok)} measured configurations have a FLOP count.")
    counted = ok[ok.gflops.notna()]
    if not len(counted):
        return (f"**Roofline**: none of the {len(ok)} measured configurations has a FLOP count (rows measured "
                f"before work per call was counted), so none is placed on the roofline.")
    known = counted[counted.regime != UNKNOWN]
    counts = ", ".join(f"{int((known.regime == r).sum())} {r}" for r in REGIMES)
    line = f"**Roofline** ({len(counted)} of {len(ok)} measured configurations with a FLOP count): {counts}"
    if len(known):
        best = known.loc[known.share_of_peak.idxmax()]
        line += (f"; highest share of peak {_pct(best.share_of_peak)} of {best.peak_of} ({best.gflops:,.1f} GFLOP/s, "
                 f"{best.variant} {_shape(best)}), lowest {_pct(known.share_of_peak.min())}")
    return line + ". " + rule_text(peaks)


def _pct(share: float) -> str:
    """A share as a percentage: two significant digits below 10% (0.55%, 8.1%), whole percents above (12%, 104%)."""
    pct = 100 * share
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


def _shape(row) -> str:
    parts = [f"{row['model']}", f"b{int(row['batch_size'])}"]
    if pd.notna(row.get("seq_len")):
        parts.append(f"s{int(row['seq_len'])}")
    if pd.notna(row.get("image_size")):
        parts.append(f"{int(row['image_size'])}px")
    if isinstance(row.get("strategy"), str):
        parts.append(row["strategy"])
    return " ".join(parts)


def regime_findings(df: pd.DataFrame, rt: pd.DataFrame, pairs: Iterable[tuple[str, str]], shape: list[str], *,
                    column: str = "variant", band: float | None = None) -> list[str]:
    """For each (candidate, baseline) pair of `column` values: in how many shapes of each regime (the
    baseline's, where the shape runs as the baseline runs it) the candidate is faster, slower or equal
    (speed-up CIs, speedups.verdict), matched on the `shape` columns. `rt` is roofline_table(df, …), row for
    row; `df` needs raw samples."""
    band = band or speedups.EQUIVALENCE
    ok = df.assign(_regime=list(rt.regime))
    ok = ok[ok.status == "ok"]
    keys = [c for c in shape if c in ok]
    lines = []
    for cand, base in pairs:
        c_rows = ok[ok[column] == cand].set_index(keys)
        b_rows = ok[ok[column] == base].set_index(keys)
        tally: dict[str, list[str]] = {}
        for key in c_rows.index.intersection(b_rows.index):
            b, c = b_rows.loc[key], c_rows.loc[key]
            if isinstance(b, pd.DataFrame) or isinstance(c, pd.DataFrame):
                continue  # not one row per shape: not a pair
            s = speedups.speedup(b, c)
            tally.setdefault(b["_regime"], []).append(speedups.verdict(s.ci_low, s.ci_high, band))
        if not tally or set(tally) == {UNKNOWN}:
            continue
        parts = [f"faster in {v.count('faster')} of {len(v)} {r} shapes"
                 + (f" (slower in {v.count('slower')}, equal in {v.count('equal')})" if len(v) > v.count("faster")
                    else "")
                 for r, v in sorted(tally.items(), key=lambda kv: (REGIMES + (UNKNOWN,)).index(kv[0]))]
        lines.append(f"**{cand} over {base} by regime** (the regime of {base}'s call): " + "; ".join(parts) + ".")
    return lines


def plottable(rt: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows with an achieved rate and an intensity, the others)."""
    ok = (rt.status == "ok") & rt.gflops.notna() & rt.intensity.notna() & (rt.gflops > 0)
    return rt[ok], rt[~ok]





def attach(analysis, df: pd.DataFrame, peaks: dict | None, pairs: Iterable[tuple[str, str]], shape: list[str], *,
           column: str = "variant", band: float | None = None):
    """A study's Analysis with the roofline added: tables["roofline"] (roofline_table) and findings on where the
    configurations sit and in which regime each candidate beats its baseline (regime_findings)."""
    rt = roofline_table(df, peaks)
    analysis.tables["roofline"] = rt
    analysis.findings.append(summary_finding(rt, peaks))
    if peaks:
        analysis.findings.extend(regime_findings(df, rt, pairs, shape, column=column, band=band))
    return analysis
