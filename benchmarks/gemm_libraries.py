"""Each library's GEMM on this machine: fp32 and bf16 through PyTorch, TensorFlow, ONNX Runtime and JAX. A benchmark
that prints, not a test.

It runs the measurement the study's limits make once per environment (machine/gemm.py, kept in env.json under
peaks["gemm"]): one process per library, the same thread count for all, the studies' GEMM shapes (BERT-base's
linear layers at 32 and 256 tokens, and a square product). It prints the CPU's instruction sets, every library's
figures with their 95% CIs and code paths, the roof (the best of them), each library against PyTorch at BERT-base's
256-token shapes, and the sentence a page would print where two differ by more than 1.3× (machine/gemm_why.py).

With --ops it then profiles one call of BERT-base (random weights) in eager PyTorch (torch.profiler) and in a
tf.function (TensorFlow's profiler, its XSpace trace read here: self time per op type, summed over threads) and
prints each one's top operators and the milliseconds spent in GEMM operators, so the two frameworks' calls are
read the same way.

    .venv/bin/python benchmarks/gemm_libraries.py                 # 2 threads, 8 s of timing (plus start-ups)
    .venv/bin/python benchmarks/gemm_libraries.py --ops --batch 1 --seq 256
    .venv/bin/python benchmarks/gemm_libraries.py --threads 4 --budget 20 --json gemm.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile
import time

import pandas as pd

GEMM_OPS = ("addmm", "mm", "bmm", "matmul", "linear", "MatMul", "BatchMatMul", "Einsum")  # names containing these


def _is_gemm(op: str) -> bool:
    return any(g.lower() in op.lower() for g in GEMM_OPS)


def _add_self_times(events: list[tuple[int, int, str]], totals: dict[str, list[float]]) -> None:
    """Add one thread's events (start ps, duration ps, name) to `totals` {op type: [self seconds, calls]}: an
    event's self time is its duration less that of the events nested in it. TensorFlow's op events are named
    "node name:op type"; others (the executor's "ExecutorState::Process", a function's run) only nest them."""
    stack: list[list] = []  # [end, name, self ps]

    def close(until: float) -> None:
        while stack and stack[-1][0] <= until:
            _, name, own = stack.pop()
            if ":" in name and "::" not in name:  # "ExecutorState::Process" and the like only hold ops
                t = totals.setdefault(name.rsplit(":", 1)[1], [0.0, 0])
                t[0] += own / 1e12
                t[1] += 1

    for start, duration, name in sorted(events, key=lambda e: (e[0], -e[1])):
        close(start)
        if stack:
            stack[-1][2] -= duration
        stack.append([start + duration, name, duration])
    close(float("inf"))


def tf_top_ops(call, top: int) -> tuple[list[dict], float]:
    """One call of `call` under TensorFlow's profiler: the top op types by self time (an op's events less the
    events nested in them on the same thread), as profiling.top_ops gives PyTorch's; and the call's seconds."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from studylib.machine import profiling

    logdir = tempfile.mkdtemp(prefix="tf-profile-")
    tf.profiler.experimental.start(logdir)
    t0 = time.perf_counter()
    call()
    wall = time.perf_counter() - t0
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    totals: dict[str, list[float]] = {}
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            _add_self_times([(e.offset_ps, e.duration_ps, plane.event_metadata[e.metadata_id].name)
                             for e in line.events], totals)
    return profiling.top_ops(totals, top), wall


def profile_ops(threads: int, batch: int, seq: int, top: int = 8) -> None:
    """BERT-base's top operators in eager PyTorch and in a tf.function, one profiled call each after two warm
    calls, and the share of each call in GEMM operators."""
    os.environ.pop("USE_TF", None)
    from studylib import runtimes
    from studylib.machine import profiling
    from studylib.machine.threads import apply_threads
    from studylib.workloads import models

    apply_threads(threads, ("torch", "tensorflow"))
    import torch

    w = models.torch_workload("bert-base", batch_size=batch, seq_len=seq)
    tw = models.tf_workload(w, models.build_tf_from_torch("bert-base", w.module))
    eager, graph = runtimes.get("eager").prepare(w), runtimes.get("tf-function").prepare(tw)
    with torch.inference_mode():
        for _ in range(2):
            eager.call()
            graph.call()
        t_ops, _ = profiling.torch_profile(eager.call, "cpu", top)
    f_ops, wall = tf_top_ops(lambda: graph.call(), top)
    for name, ops in (("eager PyTorch (torch.profiler)", t_ops), ("tf.function (TensorFlow's profiler)", f_ops)):
        gemm_ms = sum(o["self_ms"] for o in ops if _is_gemm(o["op"]))
        gemm_pct = sum(o["self_pct"] for o in ops if _is_gemm(o["op"]))
        print(f"BERT-base b{batch}×{seq}, {name}: GEMM ops {gemm_ms:,.0f} ms, {gemm_pct:.0f}% of the self time")
        for o in ops:
            print(f"    {o['op'][:60]:60s} {o['self_ms']:9.1f} ms {o['self_pct']:5.1f}%  {o['calls']} calls")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--budget", type=float, default=8.0, help="seconds of timing, shared by the libraries")
    parser.add_argument("--json", help="also write the record to this file")
    parser.add_argument("--ops", action="store_true", help="also profile BERT-base's top ops in both frameworks")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=256)
    args = parser.parse_args()

    from studylib.machine import gemm, gemm_why, limits

    started = time.perf_counter()
    load = os.getloadavg()[0]  # other processes on the cores slow every library, each at its own moments
    record = gemm.measure_libraries(args.threads, args.budget)
    peaks = {"gemm": record}
    print(f"CPU: {record['cpu_model']} · flags: {', '.join(record['cpu_flags']) or 'unknown'} · "
          f"{args.threads} threads · measured in {time.perf_counter() - started:.1f} s · load average (1 min) "
          f"{load:.1f} before, {os.getloadavg()[0]:.1f} after")
    for key, r in record["libraries"].items():
        if r.get("status") == "ok":
            print(f"  {key}: {r['library']} {r['version']}, {r['call']}; kernel library {r['kernel_library']}; "
                  f"{json.dumps(r.get('info', {}), default=str)}")
        else:
            print(f"  {key}: {r.get('status')} — {r.get('message')}")
    table = gemm_why.gemm_table(peaks)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60, "display.max_rows", 200):
        print(table.drop(columns=["version"]).to_string(index=False))
    for dtype in record["dtypes"]:
        best = limits.roof(peaks, dtype)
        if best:
            print(f"{dtype} roof: {best['gflops']:,.1f} GFLOP/s ({best['runner']}, {best['shape']})")
        for key in record["libraries"]:
            ratio = gemm_why.gemm_ratio(peaks, key, "torch", dtype)
            if key != "torch" and ratio is not None:
                print(f"  {dtype} {key} over torch at BERT-base's 256-token shapes: {ratio:.2f}×")
        for key in record["libraries"]:
            sentence = gemm_why.mechanism(peaks, key, "torch", dtype) if key != "torch" else None
            if sentence:
                print(f"  why ({key} vs torch, {dtype}): {sentence}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    if args.ops:
        profile_ops(args.threads, args.batch, args.seq)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
