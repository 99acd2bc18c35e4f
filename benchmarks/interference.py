"""Do frameworks interleaved in one process slow one another? A benchmark that prints, not a test.

Study 02 times PyTorch and TensorFlow variants (study 03: PyTorch and ONNX Runtime) in the same rounds
of the same process. PyTorch's OpenMP threads spin-wait after each parallel region; TensorFlow and ONNX
Runtime keep pools of their own. If one framework's idle threads steal the cores another needs, the
interleaved design would charge that to whichever variant runs next.

For each setting (OpenMP wait policy as torch starts: the default, or PASSIVE) it runs a fresh process
that prepares eager PyTorch twice (eager and eager-aa, an independent copy), tf.function on the same
weights and ONNX Runtime, and times, with the study's own round scheduler:

  alone:  eager and eager-aa interleaved
  mixed:  eager, eager-aa, tf-function and ort interleaved

and prints eager's median in each (mixed / alone > 1 means the other frameworks slow PyTorch down)
and the A/A speed-up with its CI in each.

    .venv/bin/python benchmarks/interference.py                 # BERT-base, batch 1 × 8 and 64 tokens
    .venv/bin/python benchmarks/interference.py --model bert-tiny --seconds 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def _child(model: str, seq_lens: list[int], seconds: float, threads: int) -> None:
    from studylib import runtimes
    from studylib.bench.builder import Workloads
    from studylib.bench.timing import measure_rounds
    from studylib.core.config import Config
    from studylib.machine.threads import apply_threads
    from studylib.stats import stats

    apply_threads(threads, ("torch", "tensorflow"))
    import torch

    out = []
    for seq in seq_lens:
        workloads = Workloads(seed=0)
        calls = {}
        for variant in ("eager", "eager-aa", "tf-function", "ort"):
            c = Config(model, variant, "fp32", 1, "cpu", threads, seq_len=seq)
            rt = runtimes.get(variant)
            w = workloads.workload(c, rt.framework)
            p = rt.prepare(w)
            calls[variant] = p.call
        settings = dict(warmup_calls=3, min_rounds=20, max_rounds=100_000, min_time_s=seconds, target_ci_pct=0.01,
                        budget_s=seconds, block_s=0.02)
        with torch.inference_mode():
            alone = measure_rounds({k: calls[k] for k in ("eager", "eager-aa")}, baseline="eager", seed=1, **settings)
            mixed = measure_rounds(calls, baseline="eager", seed=2, **settings)
            alone2 = measure_rounds({k: calls[k] for k in ("eager", "eager-aa")}, baseline="eager", seed=3, **settings)

        def row(r, name):
            n = len(r.samples[name])
            return {"samples_s": r.samples[name], "sample_rep": [0] * n, "sample_round": list(range(n)), "group_id": "g"}

        def med(r):
            x = sorted(r.samples["eager"])
            return x[len(x) // 2]

        res = {"seq_len": seq}
        for label, r in (("alone", alone), ("mixed", mixed), ("alone again", alone2)):
            aa = stats.speedup(row(r, "eager"), row(r, "eager-aa"))
            res[label] = {"eager_median_s": med(r), "rounds": r.rounds, "aa": [aa.ratio, aa.ci_low, aa.ci_high]}
        out.append(res)
    print("RESULT " + json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bert-base")
    ap.add_argument("--seq-lens", default="8,64")
    ap.add_argument("--seconds", type=float, default=20.0, help="timing per design and shape")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    seqs = [int(s) for s in a.seq_lens.split(",")]
    if a.child:
        _child(a.model, seqs, a.seconds, a.threads)
        return 0
    print(f"{a.model}, batch 1, {a.threads} threads, {a.seconds:.0f} s per design and shape; eager's median "
          f"alone (eager + eager-aa) vs mixed (with tf-function and ort in the same rounds)\n")
    print(f"{'OMP wait policy':16s} {'seq':>4s} {'eager alone':>12s} {'mixed':>10s} {'again':>10s} "
          f"{'mixed/alone':>11s}  A/A alone · mixed · again (95% CI)")
    for policy in ("default", "PASSIVE"):
        env = dict(os.environ, USE_TF="", TF_CPP_MIN_LOG_LEVEL="2", TRANSFORMERS_VERBOSITY="error")
        env.pop("USE_TF")
        if policy != "default":
            env["OMP_WAIT_POLICY"] = policy
        else:
            env.pop("OMP_WAIT_POLICY", None)
        proc = subprocess.run([sys.executable, __file__, "--child", "--model", a.model, "--seq-lens", a.seq_lens,
                               "--seconds", str(a.seconds), "--threads", str(a.threads)],
                              capture_output=True, text=True, env=env)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{policy}: failed\n{proc.stderr[-2000:]}")
            continue
        for r in json.loads(line[len("RESULT "):]):
            al, mx, ag = r["alone"], r["mixed"], r["alone again"]

            def aa(x):
                return f"{x['aa'][0]:.3f} [{x['aa'][1]:.3f}–{x['aa'][2]:.3f}]"

            print(f"{policy:16s} {r['seq_len']:4d} {al['eager_median_s'] * 1e3:10.2f}ms {mx['eager_median_s'] * 1e3:8.2f}ms "
                  f"{ag['eager_median_s'] * 1e3:8.2f}ms "
                  f"{mx['eager_median_s'] / ((al['eager_median_s'] + ag['eager_median_s']) / 2):11.3f}  "
                  f"{aa(al)} · {aa(mx)} · {aa(ag)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
