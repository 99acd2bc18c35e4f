"""One process with TensorFlow for every test that checks it against PyTorch (study 02's twin, seed 001's micro-ops,
seed 000's XLNet and XLM):
importing TensorFlow and PyTorch together costs seconds, paid once per test session (conftest's `tensorflow_probe`).

Each check is a script that leaves its result in `out`; the process prints them all as one JSON line."""

import json
import os
import subprocess
import sys

# Study 02: the TensorFlow twins hold the PyTorch weights (eager and XLA), and thread settings reach both frameworks.
TWIN = r"""
from studylib.workloads import models
from studylib import runtimes
from studylib.machine.threads import apply_threads
apply_threads(1, ("torch", "tensorflow"))
import tensorflow as tf, torch
from studylib.machine import environment
out = {"threads": environment.capture()["threads"], "diffs": {}}
for name in ("bert-tiny", "distilbert-tiny", "gpt2-tiny"):
    w = models.torch_workload(name, batch_size=2, seq_len=12, seed=5)
    with torch.inference_mode():
        ref = w.module(*w.inputs).numpy()
    twin = models.tf_workload(w, models.build_tf_from_torch(name, w.module))
    xla = runtimes.get("tf-xla").prepare(twin)
    eager_tf = np.asarray(twin.module(*twin.inputs))
    xla_out = np.asarray(xla.call())
    out["diffs"][name] = [float(np.abs(eager_tf - ref).max()), float(np.abs(xla_out - ref).max()),
                          float(np.abs(ref).max()), xla.compilations()]
"""

# Seed 001: the micro-ops (argmax, strided gather) agree exactly between PyTorch, TorchScript and TensorFlow.
OPS = r"""
from studylib.workloads import models
from studylib import runtimes
out = {}
for name in ("op-argmax", "op-gather"):
    w = models.torch_workload(name, batch_size=3, seq_len=10, seed=2)
    ref = runtimes.get("eager").to_numpy(w.module(*w.inputs))
    tfw = models.tf_workload(w, models.build_tf_from_torch(name, w.module))
    outs = {}
    for variant in ("tf-eager", "tf-function", "tf-xla"):
        r = runtimes.get(variant)
        outs[variant] = float(np.abs(r.to_numpy(r.prepare(tfw).call()) - ref).max())
    ts = runtimes.get("torchscript")
    with ts.context():
        outs["torchscript"] = float(np.abs(ts.to_numpy(ts.prepare(w).call()) - ref).max())
    out[name] = {"diffs": outs, "shape": list(ref.shape)}
"""

# Seed 000's XLNet and XLM: their TensorFlow twins hold the PyTorch weights (eager and tf.function, one trace).
XL = r"""
import torch
from studylib.workloads import models
from studylib import runtimes
out = {}
for name in ("xlnet-tiny", "xlm-tiny"):
    w = models.torch_workload(name, batch_size=2, seq_len=12, seed=5)
    with torch.inference_mode():
        ref = w.module(*w.inputs).numpy()
    twin = models.tf_workload(w, models.build_tf_from_torch(name, w.module))
    graph = runtimes.get("tf-function").prepare(twin)
    eager_tf = np.asarray(twin.module(*twin.inputs))
    graph_out = np.asarray(graph.call())
    out[name] = [list(eager_tf.shape), float(np.abs(eager_tf - ref).max()), float(np.abs(graph_out - ref).max()),
                 float(np.abs(ref).max()), graph.compilations()]
"""

# One study-02 group per tiny XLNet and XLM, measured as a run does: every variant ok, parity, work counted.
XL_GROUP = r"""
from studylib.core.config import Config
from studylib.bench import sweep
from studylib.bench.plan import Plan
from studylib.bench.schemas import MeasureSettings
from studylib.bench.builder import Workloads
out = {}
plan = Plan("02_torchscript_vs_xla", "p", {"fingerprint": "f", "git_commit": None},
            MeasureSettings(warmup_calls=1, min_rounds=3, max_rounds=3, min_time_s=0.0, target_ci_pct=50.0,
                            budget_s=0.05, block_s=0.0), {"fp32": 1e-3}, seed=0, threads=1)
for model in ("xlnet-tiny", "xlm-tiny"):
    configs = [Config(model, v, "fp32", 2, "cpu", 1, seq_len=8)
               for v in ("eager", "eager-aa", "torchscript", "tf-eager", "tf-function")]
    rows = sweep.measure_group(configs, plan, workloads=Workloads(0), group_key="g", group_id="i", replicate=0)
    out[model] = [[r["variant"], r["status"], r.get("error", ""), r.get("parity_ok"), r.get("flops_per_call")]
                  for r in rows]
"""

CHECKS = {"twin": TWIN, "ops": OPS, "xl": XL, "xl_group": XL_GROUP}


def run_checks() -> dict:
    """Every check of CHECKS in one new process with TensorFlow importable: {check: its `out`}."""
    parts = ["import json", "import numpy as np", "results = {}"]
    for name, script in CHECKS.items():
        parts += [f"def _{name}():", *("    " + line for line in script.strip().splitlines()), "    return out",
                  f"results[{name!r}] = _{name}()"]
    parts.append('print("RESULT" + json.dumps(results))')
    env = {k: v for k, v in os.environ.items() if k not in ("USE_TF", "USE_TORCH")} | {"TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", "\n".join(parts)], capture_output=True, text=True, env=env,
                          timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads([x for x in done.stdout.splitlines() if x.startswith("RESULT")][-1][len("RESULT"):])
