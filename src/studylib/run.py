"""Execute a profile's notebooks with papermill, early replicates first; a failure does not stop the rest."""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .bench import grouping, plan, profiles
from .bench.replicates import RUN_ID_VAR, pending_parts
from .core import paths, study_registry
from .core.files import read_json, write_json_atomic
from .machine import environment, runlock
from .machine.gpu import policy
from .notebooks import execute as execute_file
from .report import progress, render
from .stats.results import ResultsTable
from .studies import STUDIES

KERNEL = "studylib"


def kernel_name() -> str:
    """The project's registered kernel, or the current interpreter's own when it is not registered."""
    from jupyter_client.kernelspec import find_kernel_specs

    return KERNEL if KERNEL in find_kernel_specs() else "python3"


def select_notebooks(loaded: profiles.LoadedProfile, wanted: list[str] | None) -> list[str]:
    """The profile's notebooks, or those asked for; an unknown one is a ProfileError."""
    if not wanted:
        return loaded.notebooks()

    known = list(STUDIES)
    for name in wanted:
        if name not in known:
            raise profiles.ProfileError(f"--notebook: unknown notebook {name!r} (known: {', '.join(known)})")
        if name not in loaded.sections:
            raise profiles.ProfileError(f"{loaded.path.name}: notebooks: has no section for {name!r}")
    return list(wanted)


def planned(loaded: profiles.LoadedProfile, notebook: str, *, force: bool = False):
    """(all configurations of a notebook, those a run would measure now: whole groups)."""

    study = STUDIES[notebook]
    prof = loaded.settings_for(notebook)  # what study.start measures with: its section's `measure`
    configs = study_registry.grid(loaded, notebook)
    table = ResultsTable(paths.results_dir(loaded.name) / f"{notebook}.jsonl")
    env = environment.capture(loaded.name, policy(loaded.profile.tf32, loaded.profile.device))
    groups = grouping.pending_groups(configs, plan.build(notebook, loaded.name, prof, env), table=table, force=force,
                                     group_by=study.group_by)
    keys = {c.key for g in groups.values() for c in g}
    return configs, [c for c in configs if c.key in keys]


# a GPU's guessed speed over the 2-core CPU plan is calibrated on, and cards' bandwidths (GB/s; docs/method.md)
GPU_SPEED = 30.0
CARD_BANDWIDTH_GBS = {"t4": 320.0, "v100": 900.0, "a100": 1555.0, "3090ti": 1008.0, "h100": 3350.0}


def card_speed(card: str | None) -> float:
    """A card's guessed speed over the 2-core CPU: GPU_SPEED scaled by its bandwidth over the A100's (unset: an A100)."""
    return GPU_SPEED * CARD_BANDWIDTH_GBS[card or "a100"] / CARD_BANDWIDTH_GBS["a100"]


def machine_speed(device: str, threads: int, card: str | None = None) -> float:
    return card_speed(card) if device == "cuda" else max(1.0, (threads / 2) ** 0.7)


def estimate_s(loaded: profiles.LoadedProfile, notebook: str, configs) -> float:
    """Plan's model: the seconds a notebook's `configs` take to measure, all replicates (the study's estimate_s)."""
    p = loaded.profile
    measure, section = loaded.measure_for(notebook).model_dump(), loaded.sections[notebook]
    speed = machine_speed(p.device, p.threads, p.card)
    return sum(STUDIES[notebook].estimate_s(c, section, measure, speed) for c in configs)


def _rows_in(path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def _counter(loaded: profiles.LoadedProfile, notebook: str):
    """A function: configuration-replicates of the notebook measured since now (parts, and combined rows as k)."""
    table = paths.results_dir(loaded.name) / f"{notebook}.jsonl"
    parts = paths.parts_dir(loaded.name, notebook)
    k, start = loaded.measure_for(notebook).replicates, _rows_in(table)
    return lambda: k * (_rows_in(table) - start) + pending_parts(parts)


def _work(loaded: profiles.LoadedProfile, notebooks: list[str], force: bool) -> dict[str, progress.StudyWork]:
    """Per notebook, what this run measures (configuration-replicates) and plan's estimate for it."""
    work = {}
    for nb in notebooks:
        todo = planned(loaded, nb, force=force)[1]
        work[nb] = progress.StudyWork(len(todo) * loaded.measure_for(nb).replicates, estimate_s(loaded, nb, todo))
    return work


def measuring_environment(loaded: profiles.LoadedProfile) -> None:
    """What the kernels and measuring processes inherit: threads are fixed before torch is imported."""
    os.environ.update(OMP_NUM_THREADS=str(loaded.profile.threads), MKL_NUM_THREADS=str(loaded.profile.threads),
                      STUDYLIB_RUNNER="papermill")


def execute(loaded: profiles.LoadedProfile, notebook: str, *, force: bool = False,
            display: progress.RunProgress | None = None) -> dict:
    """Run one notebook through papermill; its manifest entry (status, time, failing cell)."""
    params = profiles.notebook_inputs(loaded, force=force)  # the profile, its overrides, force: start loads the rest
    measuring_environment(loaded)
    return papermill_entry(notebook, paths.executed_dir(loaded.name), params, on_cell=display and display.cell)


def early_replicates(profile: str, loaded: profiles.LoadedProfile, notebooks: list[str], *, force: bool,
                     display: progress.RunProgress, counters: dict) -> dict[str, float]:
    """Measure replicates 0 … k-2 of every notebook, pass by pass, before any notebook runs; seconds per notebook."""
    measuring_environment(loaded)
    k = {nb: loaded.measure_for(nb).replicates for nb in notebooks}
    spent = dict.fromkeys(notebooks, 0.0)
    for r in range(max(k.values(), default=1) - 1):
        for nb in notebooks:
            if r >= k[nb] - 1 or not display.work[nb].total:
                continue
            t0 = time.perf_counter()
            with progress.watching(display, nb, f"early pass {r + 1} of {k[nb] - 1}", counters[nb]):
                rc = subprocess.run([sys.executable, "-m", "studylib.study", loaded.name if loaded.overrides else profile,
                                     nb, str(r)]
                                    + (["--force"] if force else [])).returncode
            spent[nb] += time.perf_counter() - t0
            if rc != 0:
                display.write(f"{nb}: the early pass of replicate {r + 1} ended with exit code {rc}; the notebook "
                              "measures what it left")
    return {nb: round(s, 1) for nb, s in spent.items() if s}


@contextmanager
def environ(**values: str) -> Iterator[None]:
    """os.environ with `values` set while the block runs, as it was after."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_id():
    """An id for this run, inherited by every process it starts (a forced run keeps its own early passes' parts)."""
    return environ(**{RUN_ID_VAR: uuid.uuid4().hex[:12]})


def _notebook_file(notebook: str):
    """A study's notebook (where its registry entry says), or a notebook under notebooks/ (the summary)."""
    return STUDIES[notebook].notebook_path if notebook in STUDIES else paths.notebook_path(notebook)


def papermill_entry(notebook: str, executed_dir, params: dict, on_cell=None) -> dict:
    """Execute the notebook into executed_dir with `params`; the manifest entry it ends with."""
    import papermill as pm

    out = executed_dir / f"{notebook}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    entry = {"notebook": notebook, "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
             "status": "ok", "failed_cell": None, "error": None, "executed": str(out.relative_to(executed_dir.parent))}
    t0 = time.perf_counter()
    try:
        execute_file(_notebook_file(notebook), out, params, kernel_name=kernel_name(), on_cell=on_cell)
    except pm.PapermillExecutionError as e:
        entry.update(status="failed", failed_cell=e.exec_count, error=f"{e.ename}: {e.evalue}"[:500])
    except Exception as e:  # the kernel died, the notebook is unreadable, ...
        entry.update(status="failed", error=f"{type(e).__name__}: {e}"[:500])
    entry["duration_s"] = round(time.perf_counter() - t0, 1)
    return entry


def run(profile: str, notebooks: list[str] | None = None, *, force: bool = False, render: bool = False,
        stream=None, terminal: bool | None = None, clock=None, overrides=()) -> int:
    """Execute the notebooks (`render`: then the pages); 0 when all succeeded, else 1; raises ProfileError first."""
    loaded = profiles.load(profile, overrides=overrides)
    names = select_notebooks(loaded, notebooks)
    with runlock.hold(loaded.name, f"studylib run --profile {loaded.name}"), _run_id():
        if loaded.overrides:  # before the early passes, whose processes load the profile by this name
            profiles.record_overrides(loaded)
        counters = {nb: _counter(loaded, nb) for nb in names}
        work = _work(loaded, names, force)
        with progress.RunProgress(loaded.name, work, stream=stream, terminal=terminal, clock=clock) as display:
            early = early_replicates(profile, loaded, names, force=force, display=display, counters=counters)
            manifest = read_json(paths.manifest_path(loaded.name), {}) or {}
            failed = 0
            for nb in names:
                k = loaded.measure_for(nb).replicates
                phase = f"notebook (replicate {k} of {k})" if work[nb].total and k > 1 else "notebook"
                with progress.watching(display, nb, phase, counters[nb]):
                    entry = execute(loaded, nb, force=force, display=display)
                display.finish(nb)
                if nb in early:  # the seconds its earlier replicates took, before the notebooks ran
                    entry["early_replicates_s"] = early[nb]
                manifest[nb] = entry
                write_json_atomic(paths.manifest_path(loaded.name), manifest)
                if entry["status"] != "ok":
                    failed += 1
                    display.write(f"{nb}: FAILED at cell {entry['failed_cell']}: {entry['error']}")
            display.start(paths.SUMMARY_NOTEBOOK, "notebook (across profiles)")
            failed += run_summary(display.write, display.cell) != 0
            if render:
                failed += _render(loaded.name, display) != 0
        for line in summary_lines(loaded, names, manifest):
            print(line, file=stream if stream is not None else sys.stderr, flush=True)
    return 1 if failed else 0


def _render(profile: str, display: progress.RunProgress) -> int:
    """The render phase: each executed notebook's page, the summary's, the index; 0 when all were written."""
    executed = sorted(paths.executed_dir(profile).glob("*.ipynb"))
    try:
        for i, nb in enumerate(executed, 1):
            display.start(nb.stem, f"render (page {i} of {len(executed)})")
            render.notebook_html(nb, paths.html_dir(profile) / f"{nb.stem}.html")
        display.start(paths.SUMMARY_NOTEBOOK, "render (the summary's page and the index)")
        render.render_summary()
        display.write(f"wrote {render.index()}")
    except Exception as e:  # a page that cannot be written fails the run, after the notebooks have run
        display.write(f"render: FAILED: {type(e).__name__}: {e}"[:500])
        return 1
    return 0


def shown(path) -> str:
    """A path as a person would type it: relative to the working folder where it lies below it."""
    try:
        return str(Path(path).relative_to(os.getcwd()))
    except ValueError:
        return str(path)


def summary_lines(loaded: profiles.LoadedProfile, notebooks: list[str], manifest: dict) -> list[str]:
    """One line per study: its configurations ok / skipped / failed, the minutes it took and where its page is."""
    lines = []
    for nb in notebooks:
        keys = [c.key for c in study_registry.grid(loaded, nb)]
        latest = ResultsTable(paths.results_dir(loaded.name) / f"{nb}.jsonl").latest()
        status = [latest[k]["status"] for k in keys if k in latest]
        counts = [f"{status.count('ok')} ok", f"{status.count('skipped')} skipped",
                  f"{len(status) - status.count('ok') - status.count('skipped')} failed"]
        if len(status) < len(keys):
            counts.append(f"{len(keys) - len(status)} not measured")
        entry = manifest.get(nb, {})
        minutes = ((entry.get("duration_s") or 0) + (entry.get("early_replicates_s") or 0)) / 60
        page = paths.html_dir(loaded.name) / f"{nb}.html"
        executed = paths.executed_dir(loaded.name) / f"{nb}.ipynb"
        where = (f"page {shown(page)}" if page.exists() and executed.exists()
                 and page.stat().st_mtime >= executed.stat().st_mtime
                 else f"executed {shown(executed)} (`studylib report` writes its page, {shown(page)})")
        notebook = "" if entry.get("status", "ok") == "ok" else f" · notebook FAILED at cell {entry.get('failed_cell')}"
        lines.append(f"{nb}: {len(keys)} configurations: {', '.join(counts)} · {minutes:.1f} min · {where}{notebook}")
    return lines


def run_summary(say=None, on_cell=None, executed=None) -> int:
    """Execute the cross-hardware summary (into `executed`); 0 when it ran, else 1. `say` prints its outcome."""
    nb = paths.SUMMARY_NOTEBOOK
    say = say or (lambda message: print(message, file=sys.stderr))
    entry = papermill_entry(nb, executed or paths.summary_dir() / "executed", {}, on_cell)
    kept = (read_json(paths.summary_dir() / "run.json", {}) or {}).get(nb, {})
    write_json_atomic(paths.summary_dir() / "run.json", {nb: {**kept, **entry}})
    if entry["status"] != "ok":
        say(f"{nb}: FAILED at cell {entry['failed_cell']}: {entry['error']}")
        return 1
    say(f"{nb}: ok in {entry['duration_s']:.0f} s")
    return 0
