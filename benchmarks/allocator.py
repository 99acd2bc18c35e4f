"""What do glibc's page faults cost a call? A benchmark that prints, not a test.

Timed rounds run with freed memory kept for reuse (machine/allocator.py). This measures why: study 03's classifier
(DistilRoBERTa-sized, random weights) at one batch of random tokens, eager PyTorch and its dynamic int8, timed in
rounds that alternate, in random order, glibc's defaults (each large activation mapped and faulted in afresh every
call) and the study's policy (freed blocks reused). Each policy's turn makes one untimed call per runtime to reach
its steady state, then times one call of each. It prints each runtime's median seconds per call and minor page faults
per call under both policies, and their ratio.

    .venv/bin/python benchmarks/allocator.py                    # batch 32 × 128 tokens, 8 rounds
    .venv/bin/python benchmarks/allocator.py --batch 8 --rounds 12
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import time

import numpy as np

os.environ.setdefault("USE_TF", "0")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from studylib.machine import allocator
    from studylib.machine.threads import apply_threads
    from studylib.workloads import models

    apply_threads(args.threads)
    import warnings

    import torch

    module = models.build_torch("distilroberta-classifier", seed=0, dtype="fp32", device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        int8 = torch.ao.quantization.quantize_dynamic(module, {torch.nn.Linear}, dtype=torch.qint8)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (args.batch, args.seq), generator=gen)
    inputs = (ids, torch.ones_like(ids))
    runtimes = {"eager": module, "torch-int8": int8}

    def call(m) -> tuple[float, int]:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        with torch.inference_mode():
            m(*inputs)
        return time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults

    got: dict[tuple[str, str], list[tuple[float, int]]] = {}
    rng = np.random.default_rng(0)
    for _ in range(args.rounds):
        for policy in rng.permutation(["glibc defaults", "memory kept"]):
            with allocator.reused_memory() if policy == "memory kept" else contextlib.nullcontext():
                for m in runtimes.values():
                    call(m)  # this policy's steady state
                for name in rng.permutation(list(runtimes)):
                    got.setdefault((name, policy), []).append(call(runtimes[name]))
    print(f"batch {args.batch} × {args.seq} tokens, {args.threads} threads, {args.rounds} rounds; "
          f"allocator policy: {allocator.policy()}")
    print(f"{'runtime':12} {'policy':16} {'median s/call':>14} {'page faults/call':>17}")
    for name in runtimes:
        med = {}
        for policy in ("glibc defaults", "memory kept"):
            xs = got[(name, policy)]
            med[policy] = float(np.median([t for t, _ in xs]))
            print(f"{name:12} {policy:16} {med[policy]:14.4f} {np.median([f for _, f in xs]):17.0f}")
        print(f"{name:12} {'defaults / kept':16} {med['glibc defaults'] / med['memory kept']:14.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
