"""What a notebook calls: validate its parameters, fix threads, capture the environment, run its sweep."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

from . import environment, paths, profiles, sweep
from .results import ResultsTable, write_json_atomic
from .timing import Measurement, harness_overhead


def apply_threads(threads: int) -> None:
    """Same thread count for every framework in a comparison: torch intra-op and inter-op here."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # already fixed for this process (it can be set once); recorded as found in the environment


@dataclass
class Study:
    """A notebook's validated parameters, its environment and its results table."""

    notebook: str
    profile: str
    common: profiles.Profile
    section: Any
    env: dict
    table: ResultsTable
    force: bool
    overhead: Measurement
    measure_settings: dict

    def run(self, configs: list[sweep.Config]):
        """Measure what is not measured yet; return these configurations' rows (raw samples included)."""
        new = sweep.run(configs, study=self.notebook, profile=self.profile, env=self.env, table=self.table,
                        measure_settings=self.measure_settings, parity_tolerance=dict(self.common.parity_tolerance),
                        seed=self.common.seed, force=self.force)
        df = self.table.frame(with_samples=True)
        order = {c.key: i for i, c in enumerate(configs)}
        df = df[df.config_key.isin(order)].sort_values("config_key", key=lambda k: k.map(order))
        print(f"{len(new)} configurations measured in this run, {len(df) - len(new)} taken from earlier runs "
              f"in the same environment; results in {self.table.path}")
        return df.reset_index(drop=True)

    def environment_table(self):
        """Environment as a two-column table, for the top of the notebook."""
        import pandas as pd

        e = self.env
        rows = [("profile", self.profile), ("captured at (UTC)", e["captured_at"]), ("CPU", e["cpu_model"]),
                ("CPUs usable / logical", f"{e['usable_cpus']} / {e['logical_cpus']}"),
                ("memory", f"{e['memory_gib']} GiB"),
                ("GPU", f"{e['gpu_name']} · CUDA {e['cuda']} · driver {e.get('gpu_driver')}" if e["gpu_name"] else "none"),
                ("OS / Python", f"{e['os']} / {e['python']}"),
                ("threads", ", ".join(f"{k}={v}" for k, v in e["threads"].items())),
                ("libraries", ", ".join(f"{k} {v}" for k, v in e["libraries"].items() if v)),
                ("git commit", e["git_commit"] or "unknown"),
                ("harness overhead per call", f"{self.overhead.median * 1e6:.2f} µs (median of {self.overhead.n} "
                                              f"no-op calls; 95% CI {self.overhead.ci_low * 1e6:.2f}–"
                                              f"{self.overhead.ci_high * 1e6:.2f} µs)"),
                ("measurement", ", ".join(f"{k}={v}" for k, v in self.measure_settings.items())),
                ("environment fingerprint", e["fingerprint"])]
        return (pd.DataFrame(rows, columns=["", "value"]).set_index("").style
                .set_properties(**{"text-align": "left", "white-space": "normal"}))


def start(notebook: str, params: dict[str, Any], *, frameworks: tuple[str, ...] = ("torch",)) -> Study:
    """Validate a notebook's parameters, fix threads, capture and save the environment."""
    prof, section = profiles.check_parameters(notebook, params)
    # transformers imports tqdm.auto, which warns in kernels without ipywidgets; the bars work without them.
    warnings.filterwarnings("ignore", message="IProgress not found")
    if "tensorflow" not in frameworks:
        os.environ.setdefault("USE_TF", "0")  # transformers would otherwise import TensorFlow too
    apply_threads(prof.threads)
    profile = params["profile"]
    env = environment.capture(profile)
    write_json_atomic(paths.results_dir(profile) / "env.json", env)
    table = ResultsTable(paths.results_dir(profile) / f"{notebook}.jsonl")
    return Study(notebook, profile, prof, section, env, table, bool(params.get("force", False)), harness_overhead(),
                 prof.measure.model_dump())
