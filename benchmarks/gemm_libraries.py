"""Each library's GEMM on this machine: fp32 and bf16 through PyTorch, TensorFlow, ONNX Runtime and JAX. A benchmark
that prints, not a test.

It runs the measurement the study's limits make once per environment (machine/gemm.py, kept in env.json under
peaks["gemm"]): one process per library, the same thread count for all, the studies' GEMM shapes (BERT-base's
linear layers at 32 and 256 tokens, and a square product). It prints the CPU's instruction sets, every library's
figures with their 95% CIs and code paths, the roof (the best of them), each library against PyTorch at BERT-base's
256-token shapes, and the sentence a page would print where two differ by more than 1.3× (analysis/gemm_why.py).

    .venv/bin/python benchmarks/gemm_libraries.py                 # 2 threads, 8 s of timing (plus start-ups)
    .venv/bin/python benchmarks/gemm_libraries.py --threads 4 --budget 20 --json gemm.json
"""

from __future__ import annotations

import argparse
import json
import time

import pandas as pd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--budget", type=float, default=8.0, help="seconds of timing, shared by the libraries")
    parser.add_argument("--json", help="also write the record to this file")
    args = parser.parse_args()

    from studylib.analysis import gemm_why
    from studylib.machine import gemm, limits

    started = time.perf_counter()
    record = gemm.measure_libraries(args.threads, args.budget)
    peaks = {"gemm": record}
    print(f"CPU: {record['cpu_model']} · flags: {', '.join(record['cpu_flags']) or 'unknown'} · "
          f"{args.threads} threads · measured in {time.perf_counter() - started:.1f} s")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
