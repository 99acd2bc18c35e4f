"""What a notebook calls: validate its parameters, fix threads, capture the environment, run its sweep."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import environment, paths, profiles, sweep
from .results import ResultsTable, write_json_atomic
from .timing import Measurement, harness_overhead


# TensorFlow's C++ start-up log, written to the process's stderr before its logging is set up (so
# TF_CPP_MIN_LOG_LEVEL does not hold it back): absl's notice, INFO/WARNING lines, and cuInit failing
# where there is no GPU. Anything else TensorFlow writes while starting is passed on.
_TF_START_UP_NOISE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\)|[IW]\d{4} |"
                                r"E\d{4} .*failed call to cuInit")


@contextmanager
def _tensorflow_start_up_log():
    """Keep TensorFlow's start-up log (see _TF_START_UP_NOISE) out of the notebook; pass other lines on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            kept = [line for line in log.read().decode(errors="replace").splitlines()
                    if line.strip() and not _TF_START_UP_NOISE.match(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr)


def apply_threads(threads: int, frameworks: tuple[str, ...] = ("torch",)) -> None:
    """Same thread count for every framework in a comparison: intra-op and inter-op, torch and TensorFlow.

    ONNX Runtime sessions take torch's intra-op count when they are created (see runtimes.onnxrt).
    """
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # already fixed for this process (it can be set once); recorded as found in the environment
    if "tensorflow" in frameworks:
        with _tensorflow_start_up_log():
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)  # leave GPU memory to PyTorch until TF needs it
        wanted = (threads, threads)
        if (tf.config.threading.get_intra_op_parallelism_threads(),
                tf.config.threading.get_inter_op_parallelism_threads()) != wanted:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(threads)
            except RuntimeError as e:  # TF's runtime already started in this process with other settings
                raise RuntimeError(f"TensorFlow already runs with other thread settings; restart the kernel ({e})")


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

    def run(self, configs: list[sweep.Config], workloads: sweep.Workloads | None = None):
        """Measure what is not measured yet; return these configurations' rows (raw samples included).

        `workloads` builds what each configuration runs (default: fixed-shape inputs per configuration;
        the data-set studies pass dataset.DatasetWorkloads).
        """
        new = sweep.run(configs, study=self.notebook, profile=self.profile, env=self.env, table=self.table,
                        measure_settings=self.measure_settings, parity_tolerance=dict(self.common.parity_tolerance),
                        seed=self.common.seed, force=self.force, workloads=workloads)
        df = self.table.frame(with_samples=True)
        order = {c.key: i for i, c in enumerate(configs)}
        df = df[df.config_key.isin(order)].sort_values("config_key", key=lambda k: k.map(order))
        print(f"{len(new)} configurations measured in this run, {len(df) - len(new)} taken from earlier runs "
              f"in the same environment; results in {self.table.path}")
        return df.reset_index(drop=True)

    def text_data(self):
        """The data-set studies' tokenized sample and the workloads that time passes over it."""
        from . import batching, dataset

        s = self.section
        cache = paths.cache_dir(self.profile)
        data = None
        for model in s.models:  # checks every model's vocabulary against the tokenizer
            data = dataset.load(s.corpus, max_length=s.max_length, seed=self.common.seed, cache_dir=cache, model=model)
        buckets = getattr(s, "bucket_batches", batching.BUCKET_BATCHES)
        return data, dataset.DatasetWorkloads(data, self.common.seed, cache, bucket_batches=buckets)

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
    # transformers' notices (unused loss settings, deprecations) say nothing about speed; errors still show.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "tensorflow" in frameworks:
        for var in ("USE_TF", "USE_TORCH"):  # transformers enables both frameworks only when neither is set
            os.environ.pop(var, None)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TF's start-up chatter out of the report
    else:
        os.environ.setdefault("USE_TF", "0")  # transformers would otherwise import TensorFlow too
    apply_threads(prof.threads, frameworks)
    profile = params["profile"]
    env = environment.capture(profile)
    write_json_atomic(paths.results_dir(profile) / "env.json", env)
    table = ResultsTable(paths.results_dir(profile) / f"{notebook}.jsonl")
    return Study(notebook, profile, prof, section, env, table, bool(params.get("force", False)), harness_overhead(),
                 prof.measure.model_dump())
