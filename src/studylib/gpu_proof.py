"""`make gpu-proof`: on one GPU, in under ten minutes by its own estimate, that the study's GPU paths do what they claim."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from . import gpu_check, runtimes
from .bench import profiles, sweep
from .bench.builder import Workloads
from .bench.plan import Plan
from .bench.schemas import MeasureSettings
from .core import paths, study_registry
from .core.config import Config, is_aa
from .core.errors import said
from .machine.gpu import apply, policy, unavailable
from .runtimes.base import RuntimeUnavailable, on_gpu, output_device, sync_removed, synced
from .runtimes.ort_gpu import ENGINE_STEP
from .runtimes.pytorch import TorchEager
from .stats.results import ResultsTable
from .workloads import models

SMOKE_PROFILE, SMOKE_NOTEBOOK = "gpu-smoke", "01_eager_vs_compiled"
# whose runtimes the proof runs in this process (study 05's Keras backends need a process each: gpu-smoke's run)
PATH_STUDIES = ("01_eager_vs_compiled", "02_torchscript_vs_xla", "03_onnx_batching", "07_text_generation")
GENERATION = "07_text_generation"
WAIT_SHARE = 0.1  # without its wait, a timed call behind the spin measures at most this share of it
SPIN_CYCLES = 100_000_000  # torch.cuda._sleep's spin: some 50-100 ms on today's cards (measured each run)
TRIES = 3
# make gpu-proof's own estimate, seconds (guesses until a GPU has run it); the smoke run by make plan's model
ESTIMATE_S = {"gpu-check": 30.0, "path": 3.0, "compile": 15.0, "oom": 20.0, "tensorrt": 60.0}


@dataclass
class Check:
    """One check of the proof: passed (True / False; None: skipped, `detail` says why) and what it saw."""

    name: str
    passed: bool | None
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'SKIP' if self.passed is None else 'FAIL'}  {self.name}: {self.detail}"


def smallest_paths(profile: str = SMOKE_PROFILE) -> list[tuple[str, Config]]:
    """(notebook, configuration): every runtime of PATH_STUDIES (no A/A copy) at each model's smallest shape."""
    loaded = profiles.load(profile)
    out: dict[tuple, tuple[str, Config]] = {}
    for nb in PATH_STUDIES:
        configs = [c for c in study_registry.grid(loaded, nb) if not is_aa(c.variant)
                   and (nb != GENERATION or c.strategy == "decode")]
        for model in dict.fromkeys(c.model for c in configs):
            mine = [c for c in configs if c.model == model]
            dtype = mine[0].dtype
            batch = min(c.batch_size for c in mine if c.dtype == dtype)
            here = [c for c in mine if c.dtype == dtype and c.batch_size == batch]
            seq = min((c.seq_len for c in here if c.seq_len is not None), default=None)
            for c in (c for c in here if c.seq_len == seq):
                fixed = c if c.seq_len is not None or c.image_size is not None else Config(
                    c.model, c.variant, c.dtype, 1, c.device, c.threads, seq_len=16)
                out.setdefault((nb, fixed.model, fixed.variant, fixed.dtype), (nb, fixed))
    return list(out.values())


def path_workloads(notebook: str):
    """What builds a path's workload: study 07's runners (GenerationWorkloads), else the fixed-shape Workloads."""
    if notebook == GENERATION:
        from .studies.text_generation_workloads import GenerationWorkloads

        return GenerationWorkloads(0)
    return Workloads(0)


def behind(call: Callable[[], object], delay: Callable[[], object], settle: Callable[[], object],
           clock=time.perf_counter) -> float:
    """The median seconds of `call` timed right after `delay` queued device work (settled, untimed, after each)."""
    seconds = []
    for _ in range(TRIES):
        settle()
        delay()
        t0 = clock()
        call()
        seconds.append(clock() - t0)
        settle()
    return statistics.median(seconds)


def wait_verdict(name: str, spin_s: float, with_s: float, without_s: float) -> Check:
    """The timed call waits for the device: with its wait at least half the spin, without it at most WAIT_SHARE."""
    ok = with_s >= 0.5 * spin_s and without_s <= WAIT_SHARE * spin_s
    return Check(f"{name}: timing waits for the device", ok,
                 f"behind a {spin_s * 1e3:.3g} ms GPU spin, the timed call took {with_s * 1e3:.3g} ms with its wait and "
                 f"{without_s * 1e3:.3g} ms without (at least half the spin, and at most {WAIT_SHARE:.0%} of it, "
                 f"expected)")


def path_checks(c: Config, workloads, delay: Callable[[], object], settle: Callable[[], object],
                clock=time.perf_counter) -> list[Check]:
    """One runtime at one shape: its output device as it reports it, and that its timed call waits for the device."""
    runtime = runtimes.get(c.variant)
    name = f"{c.variant} {c.model} {c.dtype} b{c.batch_size}" + (f"×{c.seq_len}" if c.seq_len else "")
    why = unavailable(c.device, runtime)
    if why:
        return [Check(f"{name}: on the GPU", None, why)]
    try:
        runtime.warm_up()
        w = workloads.workload(c, runtime.framework)
        with runtime.context():
            prepared = runtime.prepare(w)
            if prepared.sync is None:
                return [Check(f"{name}: timing waits for the device", False, "its prepared call has no wait on CUDA")]
            out = prepared.call()
            prepared.sync()
            device = output_device(out)
            checks = [Check(f"{name}: on the GPU", on_gpu(device), f"its output lies on {device}")]
            if runtime.family in ("compile", "export"):
                without = synced(prepared.call, None)
            else:
                with sync_removed():
                    bare = runtime.prepare(w)
                without = synced(bare.call, bare.sync)
            spin_s = behind(settle, delay, lambda: None, clock)  # the spin alone, waited for
            with_s = behind(synced(prepared.call, prepared.sync), delay, settle, clock)
            without_s = behind(without, delay, settle, clock)
        return checks + [wait_verdict(name, spin_s, with_s, without_s)]
    except RuntimeUnavailable as e:
        return [Check(f"{name}: on the GPU", None, str(e))]
    except Exception as exc:  # noqa: BLE001 - the line says what failed
        return [Check(f"{name}: on the GPU", False, said(exc))]


def _plan(precision: dict):
    settings = MeasureSettings(warmup_calls=1, min_rounds=3, max_rounds=6, min_time_s=0.0, target_ci_pct=50.0,
                               budget_s=0.5, block_s=0.0, replicates=1)
    return Plan("gpu-proof", "gpu-proof", {"fingerprint": "gpu-proof", "git_commit": None, "precision": precision},
                settings, {"fp32": 1e-3, "tf32": 0.02, "fp16": 0.02, "bf16": 0.1, "int8": 0.1}, 0, 1, ("torch",),
                None, None, ())


def oom_checks() -> list[Check]:
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
        rows = sweep.measure_group(configs, _plan(policy(False, "cuda")), workloads=Workloads(0), group_key="oom",
                                   group_id="proof", replicate=0)
    finally:
        del runtimes.REGISTRY[TooBig.name]
    got = [(r["variant"], r["status"]) for r in rows]
    return [Check("a forced out-of-memory is a row", got == [("eager", "ok"), ("proof-oom", "oom"), ("torchscript", "ok")],
                  "; ".join(f"{v}: {s}" + (f" ({r['error'][:80]})" if r["error"] else "") for (v, s), r in zip(got, rows))
                  + f"; a fresh process measures the next group: {sweep.spoils_process(rows[1])}")]


def engine_verdict(first: list, second: list) -> Check:
    """The first replicate builds the TensorRT engine, the second loads it from the cache (its step cached)."""
    made = [s for s in first if s.step == ENGINE_STEP]
    loaded = [s for s in second if s.step == ENGINE_STEP]
    ok = (len(made) == len(loaded) == 1 and not made[0].cached and loaded[0].cached
          and loaded[0].seconds == made[0].seconds)
    said = (f"replicate 1: {'built' if made and not made[0].cached else 'no build step'}"
            + (f" in {made[0].seconds:.3g} s" if made else "")
            + f"; replicate 2: {'loaded from the cache' if loaded and loaded[0].cached else 'not loaded from the cache'}")
    return Check("TensorRT engine loaded from its cache on the second replicate", ok, said)


def tensorrt_checks() -> list[Check]:
    """ort-tensorrt prepared and first called in two replicates on one cache: built, then loaded."""
    runtime = runtimes.get("ort-tensorrt")
    steps = []
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(2):
            w = models.torch_workload("bert-tiny", batch_size=1, seq_len=16, dtype="fp32", device="cuda", seed=0)
            w.cache_dir = Path(cache)
            try:
                prepared = runtime.prepare(w)
            except RuntimeUnavailable as e:
                return [Check("TensorRT engine loaded from its cache on the second replicate", None, str(e))]
            prepared.call()
            prepared.sync()
            steps.append(list(prepared.steps))
            del prepared
    return [engine_verdict(*steps)]


def smoke_verdict(rows: list[dict]) -> tuple[bool, list[str]]:
    """The study-01 smoke run: no errors, reduce-overhead with parity and CUDA graphs, eager-cudnn-benchmark ok."""
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


def smoke_checks() -> list[Check]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "studylib", "run", "--profile", SMOKE_PROFILE, "--notebook",
                           SMOKE_NOTEBOOK, "--force"], capture_output=True, text=True)
    table = paths.results_dir(SMOKE_PROFILE) / f"{SMOKE_NOTEBOOK}.jsonl"
    rows = list(ResultsTable(table).latest().values()) if table.exists() else []
    ok, lines = smoke_verdict(rows)
    lines.insert(0, f"exit {done.returncode} in {time.perf_counter() - t0:.0f} s")
    if done.returncode != 0:
        lines.append("its last output: " + " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:]))
    return [Check(f"study 01 on {SMOKE_PROFILE}", ok and done.returncode == 0, "; ".join(lines))]


def estimate_s(configs: list[tuple[str, Config]], smoke: bool) -> float:
    """The proof's own estimate: gpu-check, each path (a compiled one more), the other checks, the smoke run."""
    paths_s = sum(ESTIMATE_S["compile" if runtimes.family(c.variant) in ("compile", "export")
                             or c.variant == "static-compile" else "path"] for _, c in configs)
    smoke_s = 0.0
    if smoke:
        from .run import estimate_s as plan_estimate_s
        from .run import planned

        loaded = profiles.load(SMOKE_PROFILE)
        smoke_s = plan_estimate_s(loaded, SMOKE_NOTEBOOK, planned(loaded, SMOKE_NOTEBOOK)[0])
    return ESTIMATE_S["gpu-check"] + paths_s + ESTIMATE_S["oom"] + ESTIMATE_S["tensorrt"] + smoke_s


def summary(checks: list[Check]) -> int:
    """0 when no check failed (a skipped one says why), else 1."""
    return 1 if any(c.passed is False for c in checks) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studylib.gpu_proof", description=__doc__.splitlines()[0])
    parser.add_argument("--skip-smoke", action="store_true", help="leave out the study-01 run (the longest part)")
    args = parser.parse_args(argv)

    missing = gpu_check.no_gpu()
    if missing:
        print(f"gpu-proof: {missing}", file=sys.stderr)
        return 2

    import torch

    apply(policy(False, "cuda"), ("torch",))
    started = time.perf_counter()
    configs = smallest_paths()
    print(f"GPUs (nvidia-smi): {gpu_check._nvidia_smi() or 'nvidia-smi not found'}", flush=True)
    print(f"estimated {estimate_s(configs, not args.skip_smoke) / 60:.1f} min: gpu-check, {len(configs)} paths, "
          f"the out-of-memory and TensorRT checks" + ("" if args.skip_smoke else ", study 01 on gpu-smoke"), flush=True)
    code, report = gpu_check.check(tf32=False)
    print("\n".join(f"      {line}" for line in report), flush=True)
    checks = [Check("gpu-check", code == 0, "every path ran on the GPU or is an expected skip" if code == 0
                    else "; ".join(line for line in report if line.startswith("problem:")))]
    print(checks[-1].line(), flush=True)
    workloads = {nb: path_workloads(nb) for nb in dict.fromkeys(nb for nb, _ in configs)}
    steps: list[Callable[[], list[Check]]] = [
        (lambda nb=nb, c=c: path_checks(replace(c, device="cuda"), workloads[nb],
                             lambda: torch.cuda._sleep(SPIN_CYCLES), torch.cuda.synchronize))
        for nb, c in configs]
    steps += [oom_checks, tensorrt_checks] + ([] if args.skip_smoke else [smoke_checks])
    for step in steps:
        try:
            found = step()
        except Exception as exc:  # noqa: BLE001 - a check that crashes is a failed check
            found = [Check(getattr(step, "__name__", "check"), False, said(exc))]
        for check in found:
            checks.append(check)
            print(check.line(), flush=True)
    print(f"gpu-proof: {sum(c.passed is True for c in checks)} passed, {sum(c.passed is False for c in checks)} "
          f"failed, {sum(c.passed is None for c in checks)} skipped in {time.perf_counter() - started:.0f} s")
    return summary(checks)


if __name__ == "__main__":
    sys.exit(main())
