"""`make gpu-proof`: on one GPU, in under ten minutes, that the study's GPU paths do what they claim.

    python -m studylib.gpu_proof [--skip-smoke]

Prints, a section each: the GPU, its driver, each framework's version, CUDA and cuDNN, and the CUDA libraries loaded
in one process (gpu_check); each path's output device or skip reason; the TF32 probe; a chain of fp32 matmuls timed
with and without synchronisation (the two must differ at least 10×: timing without a sync times the launches only);
a forced out-of-memory that must give an "oom" row with the next configuration ok; a TensorRT engine built and then
loaded from its cache at least 10× faster (where TensorRT is installed); and a run of study 01 on the gpu-smoke
profile: its status counts, compile-reduce-overhead on a tiny BERT with parity ok and no CUDA-graph skip, and
eager-cudnn-benchmark, which runs only in a process started with cudnn.benchmark on. Exit 0 when every section
passes, 1 when one does not, 2 on a machine without a GPU (one line). Not run yet: no GPU while it was written.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import gpu_check, runtimes
from .bench import sweep
from .bench.builder import Workloads
from .bench.plan import Plan
from .bench.schemas import MeasureSettings
from .core import paths
from .core.config import Config
from .machine.gpu import apply, policy
from .runtimes.base import RuntimeUnavailable
from .runtimes.pytorch import TorchEager
from .stats import numbers
from .stats.results import ResultsTable
from .workloads import models

SMOKE_PROFILE, SMOKE_NOTEBOOK = "gpu-smoke", "01_eager_vs_compiled"
AT_LEAST = 10.0  # the factor the sync and the TensorRT cache must show


@dataclass
class Section:
    """One part of the proof: passed (True / False; None: skipped, with the reason) and its lines."""

    name: str
    passed: bool | None
    lines: list[str]


def chain_times(launch: Callable[[], object], sync: Callable[[], object], clock=time.perf_counter) -> tuple[float, float]:
    """Seconds for `launch` alone (asynchronous kernels are only queued) and for `launch` then `sync`."""
    sync()
    t0 = clock()
    launch()
    without = clock() - t0
    sync()
    t0 = clock()
    launch()
    sync()
    return without, clock() - t0


def sync_section() -> Section:
    import torch

    a = torch.randn(4096, 4096, device="cuda")

    def launch():
        x = a
        for _ in range(20):
            x = x @ a * (1.0 / 64)
        return x

    launch()
    without, with_sync = chain_times(launch, torch.cuda.synchronize)
    ratio = with_sync / without if without > 0 else float("inf")
    return Section("timing needs the sync", ratio >= AT_LEAST, [
        f"20 fp32 4096² matmuls: {without * 1e3:.3g} ms without synchronize (launches only), {with_sync * 1e3:.3g} ms "
        f"with it: {numbers.fmt(ratio)} (at least {numbers.fmt_factor(AT_LEAST)} expected)"])


def _plan(precision: dict):

    settings = MeasureSettings(warmup_calls=1, min_rounds=3, max_rounds=6, min_time_s=0.0, target_ci_pct=50.0,
                               budget_s=0.5, block_s=0.0, replicates=1)
    return Plan("gpu-proof", "gpu-proof", {"fingerprint": "gpu-proof", "git_commit": None, "precision": precision},
                settings, {"fp32": 1e-3, "fp16": 0.02, "bf16": 0.1, "int8": 0.1}, 0, 1, ("torch",), None, None, ())


def oom_section() -> Section:
    """A configuration that asks for twice the card: an "oom" row, and the configuration after it ok."""
    import torch

    class TooBig(TorchEager):
        name = "proof-oom"

        def prepare(self, workload):
            total = torch.cuda.get_device_properties(0).total_memory
            torch.empty(2 * total, dtype=torch.uint8, device="cuda")
            return super().prepare(workload)

    runtimes.REGISTRY[TooBig.name] = TooBig()
    try:
        configs = [Config("bert-tiny", v, "fp32", 1, "cuda", 1, seq_len=16) for v in ("eager", "proof-oom", "torchscript")]
        rows = sweep.measure_group(configs, _plan(_policy()), workloads=Workloads(0), group_key="oom",
                                   group_id="proof", replicate=0)
    finally:
        del runtimes.REGISTRY[TooBig.name]
    got = [(r["variant"], r["status"]) for r in rows]
    return Section("a forced out-of-memory is a row", got == [("eager", "ok"), ("proof-oom", "oom"), ("torchscript", "ok")],
                   [f"{v}: {s}" + (f" ({r['error'][:120]})" if r["error"] else "") for (v, s), r in zip(got, rows)]
                   + [f"spoils the process (a fresh one measures the next group): {sweep.spoils_process(rows[1])}"])


def tensorrt_section() -> Section:
    """ort-tensorrt prepared and first called twice on one cache: built, then loaded."""
    import onnxruntime as ort

    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        return Section("TensorRT engine cache", None, ["skipped: onnxruntime-gpu has no TensorRT provider here "
                                                       "(TensorRT 10 is not in the overlay: docs/profiles.md)"])

    seconds = []
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(2):
            w = models.torch_workload("bert-tiny", batch_size=1, seq_len=16, dtype="fp32", device="cuda", seed=0)
            w.cache_dir = Path(cache)
            t0 = time.perf_counter()
            try:
                prepared = runtimes.get("ort-tensorrt").prepare(w)
            except RuntimeUnavailable as e:
                return Section("TensorRT engine cache", None, [f"skipped: {e}"])
            prepared.call()
            prepared.sync()
            seconds.append(time.perf_counter() - t0)
            del prepared
        engines = sorted(p.relative_to(cache).as_posix() for p in Path(cache).rglob("*.engine"))
    ratio = seconds[0] / seconds[1]
    return Section("TensorRT engine cache", ratio >= AT_LEAST and bool(engines), [
        f"build and first call {seconds[0]:.3g} s, cached load and first call {seconds[1]:.3g} s: {numbers.fmt(ratio)} "
        f"(at least {numbers.fmt_factor(AT_LEAST)})", f"engines: {', '.join(engines) or 'none written'}"])


def smoke_verdict(rows: list[dict]) -> tuple[bool, list[str]]:
    """What the study-01 smoke run must show: status counts without errors; compile-reduce-overhead on bert-tiny with
    parity ok and no CUDA-graph skip; eager-cudnn-benchmark ok (it refuses a process not started for it)."""
    counts = Counter(r["status"] for r in rows)
    out = ["status counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    ok = counts.get("error", 0) == 0 and counts.get("oom", 0) == 0 and bool(rows)
    graphs = [r for r in rows if r["variant"] == "compile-reduce-overhead" and r["model"] == "bert-tiny"]
    for r in graphs:
        skipped = "CUDA graphs skipped" in str(r.get("notes") or "")
        good = r["status"] == "ok" and bool(r.get("parity_ok")) and not skipped
        ok &= good
        out.append(f"compile-reduce-overhead bert-tiny {r['dtype']}: {r['status']}, parity "
                   f"{'ok' if r.get('parity_ok') else 'NOT ok'} (max diff {r.get('max_abs_diff')}), CUDA-graph skips: "
                   f"{'some' if skipped else 'none'}")
    bench = [r for r in rows if r["variant"] == "eager-cudnn-benchmark"]
    for r in bench:
        ok &= r["status"] == "ok"
        out.append(f"eager-cudnn-benchmark {r['model']} {r['dtype']}: {r['status']} {r['error'][:120]}".rstrip())
    ok &= bool(graphs) and bool(bench)
    for r in rows:
        if r["status"] in ("error", "oom"):
            out.append(f"{r['status']}: {r['model']} {r['variant']} {r['dtype']}: {r['error'][:160]}")
    return ok, out


def smoke_section() -> Section:

    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "studylib", "run", "--profile", SMOKE_PROFILE, "--notebook",
                           SMOKE_NOTEBOOK, "--force"], capture_output=True, text=True)
    table = paths.results_dir(SMOKE_PROFILE) / f"{SMOKE_NOTEBOOK}.jsonl"
    rows = list(ResultsTable(table).latest().values()) if table.exists() else []
    ok, lines = smoke_verdict(rows)
    lines.insert(0, f"make run PROFILE={SMOKE_PROFILE} NOTEBOOK={SMOKE_NOTEBOOK} FORCE=1: exit {done.returncode} in "
                    f"{time.perf_counter() - t0:.0f} s")
    if done.returncode != 0:
        lines.append("its last output: " + " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:]))
    return Section("study 01 on gpu-smoke", ok and done.returncode == 0, lines)


def _policy() -> dict:
    return policy(False, "cuda")


def summary(sections: list[Section]) -> int:
    """0 when no section failed (a skipped one says why), else 1."""
    return 1 if any(s.passed is False for s in sections) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studylib.gpu_proof", description=__doc__.splitlines()[0])
    parser.add_argument("--skip-smoke", action="store_true", help="leave out the study-01 run (the longest part)")
    args = parser.parse_args(argv)

    missing = gpu_check.no_gpu()
    if missing:
        print(f"gpu-proof: {missing}", file=sys.stderr)
        return 2

    apply(_policy(), ("torch",))
    started = time.perf_counter()
    print(f"GPUs (nvidia-smi): {gpu_check._nvidia_smi() or 'nvidia-smi not found'}", flush=True)
    code, report = gpu_check.check(tf32=False)
    sections = [Section("gpu-check: every path, versions, TF32 probe, libraries", code == 0, report)]
    steps = [sync_section, oom_section, tensorrt_section] + ([] if args.skip_smoke else [smoke_section])
    for step in [None, *steps]:
        if step is not None:
            t0 = time.perf_counter()
            try:
                sections.append(step())
            except Exception as exc:  # noqa: BLE001 - a section that crashes is a failed section
                sections.append(Section(step.__name__, False, [f"{type(exc).__name__}: {str(exc)[:300]}"]))
            sections[-1].lines.append(f"({time.perf_counter() - t0:.1f} s)")
        s = sections[-1]
        print(f"\n== {s.name}: {'pass' if s.passed else 'skipped' if s.passed is None else 'FAIL'}", flush=True)
        print("\n".join(f"   {line}" for line in s.lines), flush=True)
    print(f"\ngpu-proof: {sum(s.passed is True for s in sections)} passed, {sum(s.passed is False for s in sections)} "
          f"failed, {sum(s.passed is None for s in sections)} skipped in {time.perf_counter() - started:.0f} s")
    return summary(sections)


if __name__ == "__main__":
    sys.exit(main())
