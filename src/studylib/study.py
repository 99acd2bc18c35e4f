"""What a notebook calls: load its profile, fix threads, capture the environment, run its sweep."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from .bench import dataset, grouping, plan, profiles, replicates, schemas, surprises
from .bench.builder import Workloads
from .bench.plan import Plan
from .bench.timing import Overhead, harness_overhead
from .claims import claims
from .core import paths, study_registry, wording
from .core.config import Config
from .core.files import read_json, write_json_atomic
from .machine import environment, gpu, limits, runlock
from .machine.threads import apply_threads
from .report import answer, gpu_paths, plots, prose, tables
from .report.progress import group_progress
from .stats import verdicts
from .stats.results import ResultsTable
from .studies import STUDIES
from .workloads import batching

# set by `studylib reanalyse` for the notebooks it executes: the environment, limits and rows as recorded
REANALYSE_VAR = "STUDYLIB_REANALYSE"
WHAT_RAN = "study/what_ran.txt"


class WouldMeasure(RuntimeError):
    """A re-analysis (REANALYSE_VAR) reached a step that measures."""


def reanalysing() -> bool:
    return os.environ.get(REANALYSE_VAR) == "1"


@dataclass
class StudyRun:
    """A notebook's validated parameters, its environment and its results table."""

    notebook: str
    profile: str
    settings: schemas.Profile  # the profile's common settings, validated (threads, seed, tolerances, measurement)
    section: Any
    plan: Plan  # what every measurement of this notebook depends on, built once (plan.py)
    table: ResultsTable
    force: bool
    overhead: Overhead | None  # None: a re-analysis of results whose env.json did not record it
    params: dict | None = None  # the parameters it ran with, as the profile and its overrides resolve them
    loaded: Any = None  # the profile it loaded (profiles.LoadedProfile), overrides included
    run_note: str = "nothing measured yet"  # what the last `run` measured and reused (the page's "What ran")
    verdicts: Any = None  # the verdict table the last `run` computed and saved (stats/verdicts.py)
    recorded: bool = False  # a re-analysis: the environment, limits and rows as recorded, nothing measured

    @property
    def env(self) -> dict:
        """The captured environment (machine, software, precision policy, fingerprint)."""
        return self.plan.env

    def run(self, configs: list[Config], workloads: Workloads | None = None,
            group_by: Callable[[Config], tuple] | None = None):
        """Measure what is not yet (a re-analysis only reads), under the run lock; the rows with samples."""
        if self.recorded:
            latest = self.table.latest()
            missing = [c.key for c in configs if c.key not in latest]
            commits = {m for r in latest.values() for m in re.findall(r"[0-9a-f]{7,40}", str(r.get("git_commit")))}
            if missing and not profiles.added_since(self.profile, self.notebook, missing, commits):
                raise WouldMeasure(f"{paths.display(self.table.path)}: {len(missing)} configuration(s) of the grid are "
                                   f"not in the results (first: {missing[0]}); a re-analysis measures nothing")
            added = (len(missing), missing[0]) if missing else (0, "")  # new in the grid since: not on this page
            configs = [c for c in configs if c.key in latest]
            new, groups = [], 0
            # measured with other settings than the profile's today (its parameters table shows today's)
            other = sum(latest[c.key].get("settings_hash") != self.plan.settings_hash(c) for c in configs)
        else:
            new, groups = self._measure(configs, workloads, group_by)
        df = self.table.frame(with_samples=True)
        order = {c.key: i for i, c in enumerate(configs)}
        df = df[df.config_key.isin(order)].sort_values("config_key", key=lambda k: k.map(order))
        reused = len(df) - len(new)
        self.verdicts = self._decide(df.reset_index(drop=True))
        if self.recorded:
            commits = ", ".join(sorted({str(c) for c in df.git_commit.dropna() for c in str(c).split(",")}))
            self.run_note = wording.macro(WHAT_RAN, "recorded", len(df), commits, environment.git_commit(), other,
                                          *added)
        else:
            self.run_note = wording.macro(WHAT_RAN, "measured", len(new), groups, self.plan.replicates, reused)
        return df.reset_index(drop=True)

    def _measure(self, configs: list[Config], workloads: Workloads | None = None,
                 group_by: Callable[[Config], tuple] | None = None,
                 only_replicate: int | None = None) -> tuple[list[dict], int]:
        """What `run` measures (and measure_replicate, `only_replicate` alone): the rows it added, and its groups."""

        if self.recorded or reanalysing():
            raise WouldMeasure(f"{self.notebook}: a re-analysis measures nothing, and this step would measure")
        study = STUDIES[self.notebook]
        group_by = group_by or study.group_by
        if workloads is None:
            workloads = (study.workloads(self) if study.workloads else
                         Workloads(self.plan.seed, cache_dir=paths.cache_dir(self.profile)))
        groups = grouping.pending_groups(configs, self.plan, table=self.table, force=self.force, group_by=group_by)
        with runlock.hold(self.profile, f"{self.notebook} (notebook kernel)"), \
                group_progress(sum(map(len, groups.values())), f"{self.notebook} [{self.profile}]") as advance:
            new = replicates.measure(groups, self.plan, table=self.table, workloads=workloads, force=self.force,
                                     on_group=advance, parts_dir=paths.parts_dir(self.profile, self.notebook),
                                     only_replicate=only_replicate)
        commits = {str(c) for r in new for c in str(r.get("git_commit")).split(",")}
        if len(commits | {str(self.env["git_commit"])}) > 1:
            print(f"warning: the code changed while this study ran (commits {', '.join(sorted(commits))}, started at "
                  f"{self.env['git_commit']}); each row records the commit it was measured at")
        return new, len(groups)

    def text_data(self):
        """The data-set studies' tokenized sample and the workloads that time passes over it."""

        s = self.section
        cache = paths.cache_dir(self.profile)
        data = None
        for model in s.models:  # checks every model's vocabulary against the tokenizer
            data = dataset.load(s.corpus, max_length=s.max_length, seed=self.settings.seed, cache_dir=cache, model=model)
        buckets = getattr(s, "bucket_batches", batching.BUCKET_BATCHES)
        return data, dataset.DatasetWorkloads(data, self.settings.seed, cache, bucket_batches=buckets)

    def _decide(self, df):
        """The study's verdict table, computed once from this run's rows, saved beside the results, read back."""
        path = verdicts.save(verdicts.for_study(self.notebook, df), paths.results_dir(self.profile))
        return verdicts.load(path)

    def answer(self, df, why: str = ""):
        """The page's opening (answer.top_html), with `why`: a measured mechanism in one sentence."""
        from IPython.display import HTML

        return HTML(answer.top_html(self.notebook, self.verdicts, df, environment.machine(self.env), why))

    def how_sure(self, df):
        """The page's "How sure are we" (answer.how_sure_html)."""
        from IPython.display import HTML

        return HTML(answer.how_sure_html(self.verdicts, df))

    def parameters_table(self):
        """What ran, once and readable: the profile, its overrides and every setting they resolve to, with its value."""
        def value(v) -> str:
            if isinstance(v, dict):
                return ", ".join(f"{k}={x}" for k, x in v.items())
            if isinstance(v, list | tuple):
                return ", ".join(map(str, v)) or "—"
            return str(v)

        rows = [(PARAMETER_NAMES.get(k, k), value(v)) for k, v in (self.params or {}).items()]
        return _two_columns(rows, "parameter")

    @property
    def peaks(self) -> dict | None:
        """The machine's limits measured for this run (limits.measure_peaks), for `analyse` and the roofline."""
        return self.plan.peaks

    def environment_table(self):
        """Environment as a two-column table, for the top of the notebook."""
        e = self.env
        overridden = profiles.describe_overrides(self.loaded or self.profile)  # the file and its overrides
        rows = [("profile", f"{self.profile} ({overridden})" if overridden else self.profile),
                ("captured at (UTC)", e["captured_at"]), ("CPU", e["cpu_model"]),
                ("CPUs usable / logical", f"{e['usable_cpus']} / {e['logical_cpus']}"),
                ("memory", f"{e['memory_gib']} GiB"),
                ("GPU", f"{e['gpu_name']} · CUDA {e['cuda']} · driver {e.get('gpu_driver')}" if e["gpu_name"] else "none"),
                ("OS / Python", f"{e['os']} / {e['python']}"),
                ("threads", ", ".join(f"{k}={v}" for k, v in e["threads"].items())),
                ("fp32 matmuls in TF32 (precision policy)", (e.get("precision") or {}).get("label", "not recorded")),
                ("libraries", ", ".join(f"{k} {v}" for k, v in e["libraries"].items() if v)),
                ("git commit", e["git_commit"] or "unknown"),
                ("machine limits (roofline)", limits.describe_peaks(self.plan.peaks)),
                ("harness overhead per call", self._overhead_text()),
                ("measurement", ", ".join(f"{k}={v}" for k, v in self.plan.measure.model_dump().items())),
                ("machine and software ID (equal IDs: same setup)", e["fingerprint"])]
        return _two_columns(rows, "")

    # The cells every study page ends with, one method each (the notebook holds what differs between studies).
    def _overhead_text(self) -> str:
        o = self.overhead
        if o is None:
            return "not recorded with these results"
        return wording.macro(WHAT_RAN, "overhead", o.median * 1e6, o.ci_low * 1e6, o.ci_high * 1e6, o.n)

    def what_ran(self):
        """The page's "What ran": the parameters, what this run measured and reused, and the environment."""
        from IPython.display import display

        display(self.parameters_table())
        print(self.run_note)
        return self.environment_table()

    def findings(self, analysis):
        """The study's findings: each comparison's verdicts (prose.verdict_lines), then the study's own."""
        from IPython.display import Markdown

        lines = prose.verdict_lines(self.verdicts) + list(analysis.findings)
        return Markdown("\n".join(f"- {line}" for line in lines))

    def surprises(self, df):
        """Where an expectation failed, and what the profiler says (surprises.html)."""
        from IPython.display import HTML

        return HTML(surprises.html(df, study_registry.studies()[self.notebook]))

    @staticmethod
    def claims(analysis):
        """The seeds' claims beside this run: the totals line, then the table."""
        from IPython.display import Markdown, display

        display(Markdown(claims.totals_line(analysis.claims)))
        return claims.styled(analysis.claims)

    @staticmethod
    def gpu_note(df):
        """What this run's rows did not exercise of the CUDA paths (gpu_paths)."""
        from IPython.display import Markdown

        return Markdown(gpu_paths.not_exercised_note(df))


def _two_columns(rows: list[tuple], index: str):
    """(name, value) rows as a left-aligned two-column table."""
    return (pd.DataFrame(rows, columns=[index, "value"]).set_index(index).style
            .set_properties(**{"text-align": "left", "white-space": "normal"}))


# Parameters whose names say little to a reader, in words.
PARAMETER_NAMES = {"run_shift": "shift between whole runs on this machine (recorded or unknown)",
                   "measure": "measurement settings", "parity_tolerance": "output tolerance vs eager, per dtype",
                   "overrides": "changes to the profile file (the parameters cell's overrides, or --set)",
                   "force": "re-measure stored configurations"}


def start(notebook: str, profile: str = "smoke", *, overrides: Mapping[str, Any] | None = None, force: bool = False,
          frameworks: tuple[str, ...] | None = None) -> StudyRun:
    """Load the profile with `overrides`, fix the threads, capture the environment; `force`: re-measure."""
    loaded = profiles.load(profile, overrides=overrides or {}, notebook=notebook)
    settings, section = loaded.settings_for(notebook), loaded.sections[notebook]
    frameworks = frameworks or STUDIES[notebook].frameworks
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

    tables.install()  # every table a page shows: no NaN, None or <NA>, no plain row numbers
    plots.install()  # every figure with its alt text
    apply_threads(settings.threads, frameworks)
    precision = gpu.policy(settings.tf32, settings.device)
    gpu.apply(precision, frameworks)  # the same TF32 policy for every framework, before any of them runs
    env_path = paths.results_dir(loaded.name) / "env.json"
    recorded = reanalysing()
    if recorded:  # the record as the run that measured the rows left it (reanalyse.py checked it)
        env = dict(read_json(env_path))
        mine = env.pop("notebooks", {}).get(notebook)  # this notebook's own capture time and overhead, if kept
        env |= mine or {"captured_at": f"{env.get('captured_at')} (the run's last notebook's record)"}
        peaks, kept = env.pop("peaks", None), env.pop("overhead", None)
        overhead = Overhead(**kept) if kept else None
        # env.json is the last notebook's: frameworks it did not import get this study's settings (apply_threads)
        env["threads"] = environment.thread_settings() | (env.get("threads") or {})
    else:
        env, previous = environment.capture(loaded.name, precision), read_json(env_path) or {}
        peaks = limits.cached_peaks(env, previous, device=settings.device,
                                    budget=limits.budget_s(settings.measure.model_dump()))
        overhead = harness_overhead()
        # the record: the environment, its measured limits and the harness's overhead, the last two per notebook too
        mine = {"captured_at": env["captured_at"], "overhead": asdict(overhead)}
        notebooks = previous.get("notebooks", {}) | {notebook: mine}
        write_json_atomic(env_path, env | {"peaks": peaks, "overhead": asdict(overhead), "notebooks": notebooks})
        if loaded.overrides:  # so that its name loads again (studylib report, the summary, the index)
            profiles.record_overrides(loaded)
    run_plan = plan.build(notebook, loaded.name, settings, env, frameworks=tuple(frameworks),
                          expectations=STUDIES[notebook].expectations, peaks=peaks,
                          warm_compile=STUDIES[notebook].warm_compile)
    table = ResultsTable(paths.results_dir(loaded.name) / f"{notebook}.jsonl")
    params = profiles.notebook_parameters(loaded, notebook)
    params = {"profile": params.pop("profile"), "overrides": list(loaded.overrides), **params, "force": bool(force)}
    return StudyRun(notebook, loaded.name, settings, section, run_plan, table, bool(force), overhead, params,
                    loaded=loaded, recorded=recorded)


def measure_replicate(profile: str, notebook: str, replicate: int, *, force: bool = False) -> None:
    """One replicate of a notebook's pending groups, no analysis (`python -m studylib.study PROFILE NB R [--force]`)."""
    ctx = start(notebook, profile, force=force)
    ctx._measure(study_registry.grid(ctx.loaded, notebook), only_replicate=replicate)


if __name__ == "__main__":
    import sys

    _profile, _notebook, _replicate, *_flags = sys.argv[1:]
    measure_replicate(_profile, _notebook, int(_replicate), force="--force" in _flags)
