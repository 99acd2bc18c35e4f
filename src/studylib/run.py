"""Execute notebooks for a profile with papermill, one after another; a failure does not stop the rest.

Where a profile measures each group in k ≥ 2 replicate processes, the run first measures replicates
0 … k-2 of every notebook it was asked for, pass by pass, each notebook's pass in a process of its own
(study.measure_replicate); then each notebook runs, measures its last replicate and combines. A group's
replicates so lie about a k-th of the whole run apart, not minutes (replicates.py says why).
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from .core import paths, study_registry
from .core.files import read_json, write_json_atomic
from .machine import runlock
from .machine.threads import OMP_WAIT_POLICY
from .measurement import profiles

KERNEL = "studylib"


def kernel_name() -> str:
    """The project's registered kernel, or the current interpreter's own when it is not registered."""
    from jupyter_client.kernelspec import find_kernel_specs

    return KERNEL if KERNEL in find_kernel_specs() else "python3"


def select_notebooks(loaded: profiles.LoadedProfile, wanted: list[str] | None) -> list[str]:
    """The profile's notebooks, or those asked for; an unknown one is a ProfileError."""
    if not wanted:
        return loaded.notebooks()
    from .studies import STUDIES

    known = list(STUDIES)
    for name in wanted:
        if name not in known:
            raise profiles.ProfileError(f"--notebook: unknown notebook {name!r} (known: {', '.join(known)})")
        if name not in loaded.sections:
            raise profiles.ProfileError(f"{loaded.path.name}: notebooks: has no section for {name!r}")
    return list(wanted)


def planned(loaded: profiles.LoadedProfile, notebook: str, *, force: bool = False):
    """(all configurations of a notebook, those a run would measure now) — what `plan` and the bar show.

    A configuration left to measure brings its whole group with it (its variants are timed together)."""
    from .core.results import ResultsTable
    from .machine import environment
    from .machine.gpu import policy
    from .measurement import grouping, plan
    from .studies import STUDIES

    study = STUDIES[notebook]
    prof, _ = profiles.check_parameters(notebook, profiles.notebook_parameters(loaded, notebook))
    configs = study_registry.grid(loaded, notebook)
    table = ResultsTable(paths.results_dir(loaded.name) / f"{notebook}.jsonl")
    env = environment.capture(loaded.name, policy(loaded.profile.tf32, loaded.profile.device))
    groups = grouping.pending_groups(configs, plan.build(notebook, loaded.name, prof, env), table=table, force=force,
                                     group_by=study.group_by)
    keys = {c.key for g in groups.values() for c in g}
    return configs, [c for c in configs if c.key in keys]


def _rows_in(path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


@contextmanager
def _config_progress(loaded: profiles.LoadedProfile, notebook: str, force: bool, what: str = "",
                     pending: int | None = None):
    """A terminal progress bar of configuration-replicates, advanced as replicates finish groups (part files)
    and as combined rows land in the notebook's results table. `pending`: the configurations to measure,
    where the caller has counted them (planned)."""
    from tqdm import tqdm

    from .measurement.replicates import pending_parts

    table = paths.results_dir(loaded.name) / f"{notebook}.jsonl"
    parts = paths.parts_dir(loaded.name, notebook)
    k = loaded.measure_for(notebook).replicates
    total = (len(planned(loaded, notebook, force=force)[1]) if pending is None else pending) * k
    bar = tqdm(total=total, desc=f"  {notebook}{what} configurations × {k} replicates", unit="cfg", file=sys.stderr,
               ascii=True, leave=False)
    start, stop = _rows_in(table), threading.Event()

    def done() -> int:
        return k * (_rows_in(table) - start) + pending_parts(parts)

    def watch():
        ticks = 0
        while not stop.wait(1.0):
            n, ticks = min(total, done()), ticks + 1
            if n != bar.n or ticks % 10 == 0:  # new rows at once; otherwise just keep the clock moving
                bar.n = n
                bar.refresh()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        bar.close()


def _measuring_environment(loaded: profiles.LoadedProfile) -> None:
    """What the kernels and measuring processes inherit: threads are fixed before torch is imported."""
    os.environ.update(OMP_NUM_THREADS=str(loaded.profile.threads), MKL_NUM_THREADS=str(loaded.profile.threads),
                      STUDYLIB_RUNNER="papermill")
    os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)


def execute(loaded: profiles.LoadedProfile, notebook: str, *, force: bool = False) -> dict:
    """Run one notebook through papermill; return its manifest entry (status, time, failing cell)."""
    params = profiles.notebook_parameters(loaded, notebook) | {"force": force}
    _measuring_environment(loaded)
    with _config_progress(loaded, notebook, force):
        return _papermill(notebook, paths.executed_dir(loaded.name), params)


def early_replicates(profile: str, loaded: profiles.LoadedProfile, notebooks: list[str], *,
                     force: bool = False) -> dict[str, float]:
    """Measure replicates 0 … k-2 of every notebook, pass by pass, before any notebook runs; seconds per notebook.

    Each notebook's pass is a process of its own (`python -m studylib.study`, study.measure_replicate). One that
    fails is reported and the run goes on: its notebook measures whatever replicate is still missing."""
    _measuring_environment(loaded)
    k = {nb: loaded.measure_for(nb).replicates for nb in notebooks}
    spent = dict.fromkeys(notebooks, 0.0)
    for r in range(max(k.values(), default=1) - 1):
        for nb in notebooks:
            pending = len(planned(loaded, nb, force=force)[1]) if r < k[nb] - 1 else 0
            if not pending:
                continue
            t0 = time.perf_counter()
            with _config_progress(loaded, nb, force, f" (early pass: replicate {r + 1} of {k[nb]})", pending):
                rc = subprocess.run([sys.executable, "-m", "studylib.study", profile, nb, str(r)]
                                    + (["--force"] if force else [])).returncode
            spent[nb] += time.perf_counter() - t0
            if rc != 0:
                print(f"{nb}: the early pass of replicate {r + 1} ended with exit code {rc}; the notebook measures "
                      "what it left", file=sys.stderr)
    return {nb: round(s, 1) for nb, s in spent.items() if s}


@contextmanager
def _run_id() -> Iterator[str]:
    """An id for this run, inherited by every process it starts (a forced run keeps its own early passes' parts)."""
    from .measurement.replicates import RUN_ID_VAR

    previous, run_id = os.environ.get(RUN_ID_VAR), uuid.uuid4().hex[:12]
    os.environ[RUN_ID_VAR] = run_id
    try:
        yield run_id
    finally:
        if previous is None:
            os.environ.pop(RUN_ID_VAR, None)
        else:
            os.environ[RUN_ID_VAR] = previous


def _notebook_file(notebook: str):
    """A study's notebook (where its registry entry says), or a notebook under notebooks/ (the summary)."""
    from .studies import STUDIES

    return STUDIES[notebook].notebook_path if notebook in STUDIES else paths.notebook_path(notebook)


def _papermill(notebook: str, executed_dir, params: dict) -> dict:
    """Execute the notebook into executed_dir with `params`; the manifest entry it ends with."""
    import papermill as pm

    out = executed_dir / f"{notebook}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    entry = {"notebook": notebook, "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
             "status": "ok", "failed_cell": None, "error": None, "executed": str(out.relative_to(executed_dir.parent))}
    t0 = time.perf_counter()
    try:
        source = _notebook_file(notebook)
        pm.execute_notebook(str(source), str(out), parameters=params, kernel_name=kernel_name(),
                            cwd=str(source.parent), progress_bar=False, log_output=False)
    except pm.PapermillExecutionError as e:
        entry.update(status="failed", failed_cell=e.exec_count, error=f"{e.ename}: {e.evalue}"[:500])
    except Exception as e:  # the kernel died, the notebook is unreadable, ...
        entry.update(status="failed", error=f"{type(e).__name__}: {e}"[:500])
    entry["duration_s"] = round(time.perf_counter() - t0, 1)
    return entry


def run(profile: str, notebooks: list[str] | None = None, *, force: bool = False) -> int:
    """Execute the notebooks; return 0 when all succeeded, 1 otherwise. Bad input raises ProfileError first."""
    from tqdm import tqdm

    from . import studies  # noqa: F401 - registers the studies the profile's sections are read by

    loaded = profiles.load(profile)
    names = select_notebooks(loaded, notebooks)
    with runlock.hold(loaded.name, f"studylib run --profile {loaded.name}"), _run_id():
        early = early_replicates(profile, loaded, names, force=force)
        manifest = read_json(paths.manifest_path(loaded.name), {}) or {}
        failed = 0
        for nb in tqdm(names, desc=f"notebooks [{loaded.name}]", unit="nb", file=sys.stderr, ascii=True):
            entry = execute(loaded, nb, force=force)
            if nb in early:  # the seconds its earlier replicates took, before the notebooks ran
                entry["early_replicates_s"] = early[nb]
            manifest[nb] = entry
            write_json_atomic(paths.manifest_path(loaded.name), manifest)
            if entry["status"] != "ok":
                failed += 1
                print(f"{nb}: FAILED at cell {entry['failed_cell']}: {entry['error']}", file=sys.stderr)
            else:
                earlier = f" (and {early[nb]:.0f} s in early passes)" if nb in early else ""
                print(f"{nb}: ok in {entry['duration_s']:.0f} s{earlier}", file=sys.stderr)
        failed += run_summary() != 0
    return 1 if failed else 0


def run_summary() -> int:
    """Execute the cross-hardware summary over every profile with results; 0 when it ran, 1 otherwise."""
    NOTEBOOK = paths.SUMMARY_NOTEBOOK  # noqa: N806 - the summary notebook's id

    entry = _papermill(NOTEBOOK, paths.summary_dir() / "executed", {})
    write_json_atomic(paths.summary_dir() / "run.json", {NOTEBOOK: entry})
    if entry["status"] != "ok":
        print(f"{NOTEBOOK}: FAILED at cell {entry['failed_cell']}: {entry['error']}", file=sys.stderr)
        return 1
    print(f"{NOTEBOOK}: ok in {entry['duration_s']:.0f} s", file=sys.stderr)
    return 0
