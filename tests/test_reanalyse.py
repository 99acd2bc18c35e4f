"""`studylib reanalyse DIR`: the pages, summary and index written again from the results in DIR, measuring nothing,
the results left byte for byte as they were; results whose study code version cannot be read refused (exit 2)."""

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import measuring
from conftest import cli
from studylib import study
from studylib.bench import replicates, timing
from studylib.core import paths
from studylib.machine import environment, limits
from studylib.stats import verdicts

NB = "01_eager_vs_compiled"  # the committed reference's quickest page to analyse again
REFERENCE = paths.ROOT / "reference" / "cpu"

# Loaded first by every Python process of the re-analysis (the command and each notebook's kernel inherit PYTHONPATH):
# once studylib's timing, replicates and limits modules are imported, whatever measures raises, after leaving a file
# that says so (in case a caller swallows the error); each process that armed the guard leaves a file too.
GUARD = textwrap.dedent('''
    import importlib.abc, importlib.util, os, sys
    MARKS = os.environ["REANALYSE_GUARD"]
    PATCH = {"studylib.bench.timing": ("measure_rounds", "harness_overhead"),
             "studylib.bench.replicates": ("measure",),
             "studylib.machine.limits": ("measure_peaks", "cached_peaks"),
             "studylib.machine.environment": ("capture",)}

    def _refuse(name):
        def refuse(*args, **kwargs):
            open(os.path.join(MARKS, f"measured-{os.getpid()}-{name}"), "w").close()
            raise AssertionError(f"{name} called during a re-analysis")
        return refuse

    class Guard(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in PATCH:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                for attr in PATCH[name]:
                    setattr(module, attr, _refuse(f"{name}.{attr}"))
                open(os.path.join(MARKS, f"armed-{os.getpid()}-{name}"), "w").close()
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Guard())
''')


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _copy_of_reference(root: Path) -> Path:
    """reference/cpu cut to study 01: its results (table, CSV, verdicts), env.json, run.json's entry and its page."""
    cpu = root / "cpu"
    (cpu / "results").mkdir(parents=True)
    (cpu / "html").mkdir()
    for f in (f"{NB}.jsonl", f"{NB}.csv", f"{NB}.verdicts.csv", "env.json"):
        shutil.copy2(REFERENCE / "results" / f, cpu / "results" / f)
    shutil.copy2(REFERENCE / "html" / f"{NB}.html", cpu / "html" / f"{NB}.html")
    manifest = json.loads((REFERENCE / "run.json").read_text())
    (cpu / "run.json").write_text(json.dumps({NB: manifest[NB]}))
    return root


@pytest.fixture(scope="module")
def reanalysed(tmp_path_factory):
    """A copy of part of the reference, re-analysed by the real command in a process of its own, guarded."""
    root = _copy_of_reference(tmp_path_factory.mktemp("reanalyse") / "report")
    guard = tmp_path_factory.mktemp("guard")
    marks = tmp_path_factory.mktemp("marks")
    (guard / "sitecustomize.py").write_text(GUARD)
    before = _digests(root / "cpu" / "results")
    page = (root / "cpu" / "html" / f"{NB}.html").read_bytes()
    src = str(Path(study.__file__).parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(guard), src]), REANALYSE_GUARD=str(marks))
    env.pop("STUDYLIB_OUTPUTS", None)
    done = subprocess.run([sys.executable, "-m", "studylib", "reanalyse", str(root)], capture_output=True, text=True,
                          env=env, timeout=300)
    return root, done, before, page, marks


def test_reanalyse_leaves_every_results_file_byte_identical(reanalysed):
    root, done, before, _, _ = reanalysed
    assert done.returncode == 0, done.stdout + done.stderr
    assert _digests(root / "cpu" / "results") == before


def test_reanalyse_rewrites_the_page_the_summary_and_the_index(reanalysed):
    root, done, _, page, _ = reanalysed
    assert done.returncode == 0, done.stderr
    new = (root / "cpu" / "html" / f"{NB}.html").read_text()
    assert new.encode() != page and "nothing measured: the 22 configurations' rows as recorded" in new
    assert "Answer" in new and "How sure are we" in new
    assert (root / "summary" / "html" / "06_summary.html").exists()
    index = (root / "index.html").read_text()
    assert f"cpu/html/{NB}.html" in index and "summary/html/06_summary.html" in index
    entry = json.loads((root / "cpu" / "run.json").read_text())[NB]
    assert entry["status"] == "ok" and entry["reanalysis_s"] > 0
    assert entry["duration_s"] == json.loads((REFERENCE / "run.json").read_text())[NB]["duration_s"]
    assert not (root / "cpu" / "executed").exists() and not (root / "cpu" / "cache").exists()  # kept out of DIR


def test_reanalyse_measures_nothing(reanalysed):
    _, done, _, _, marks = reanalysed
    assert done.returncode == 0, done.stderr
    marked = sorted(p.name for p in marks.iterdir())
    armed = {m.split("-")[1] for m in marked if m.startswith("armed-") and m.endswith("-studylib.bench.timing")}
    assert len(armed) >= 2, marked  # the command and at least one kernel imported the timing code, guarded
    assert not [m for m in marked if m.startswith("measured-")], marked


def test_reanalyse_decides_the_committed_verdicts_again(reanalysed):
    root, done, _, _, _ = reanalysed
    assert done.returncode == 0, done.stderr
    committed = verdicts.load(REFERENCE / "results" / f"{NB}.verdicts.csv")
    again = verdicts.load(root / "cpu" / "results" / f"{NB}.verdicts.csv")
    assert [(v.comparison, v.workload, v.decision) for v in again] == \
        [(v.comparison, v.workload, v.decision) for v in committed]


@pytest.mark.parametrize("broken, named", [
    ("row commit", f"{NB}.jsonl: line 3"), ("row settings", f"{NB}.jsonl: line 1"), ("env commit", "env.json"),
    ("missing configuration", f"{NB}.jsonl: 1 configuration(s)")])
def test_results_whose_code_version_cannot_be_read_are_refused_with_one_line(tmp_path, broken, named):
    root = _copy_of_reference(tmp_path / "report")
    results = root / "cpu" / "results"
    table, env_path = results / f"{NB}.jsonl", results / "env.json"
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    if broken == "row commit":
        rows[2]["git_commit"] = None
    elif broken == "row settings":
        rows[0].pop("settings_hash")
    elif broken == "missing configuration":
        rows.pop()
    if broken == "env commit":
        env = json.loads(env_path.read_text())
        env["git_commit"] = "unknown"
        env_path.write_text(json.dumps(env))
    else:
        table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before, page = _digests(results), (root / "cpu" / "html" / f"{NB}.html").read_bytes()
    result = cli("reanalyse", str(root), outputs=tmp_path / "unused")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and named in result.stderr, result.stderr
    assert _digests(results) == before and (root / "cpu" / "html" / f"{NB}.html").read_bytes() == page
    assert not (root / "index.html").exists() and not (root / "summary").exists()


def test_a_folder_without_results_is_refused(tmp_path):
    result = cli("reanalyse", str(tmp_path), outputs=tmp_path / "unused")
    assert result.returncode == 2 and "no results to re-analyse" in result.stderr


def test_a_reanalysing_study_run_reads_the_record_and_raises_where_it_would_measure(tmp_path, monkeypatch):
    """In this process: start reads env.json's environment and limits, run returns the stored rows, and a
    configuration the table lacks is WouldMeasure; every measuring function is patched to fail the test."""
    root = _copy_of_reference(tmp_path / "report")
    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(root))
    monkeypatch.setenv(study.REANALYSE_VAR, "1")
    monkeypatch.setattr(timing, "METHOD", measuring.reference_method())  # the settings the reference was measured with

    def measured(*args, **kwargs):
        raise AssertionError("measured")

    for module, name in ((replicates, "measure"), (timing, "measure_rounds"), (study, "harness_overhead"),
                         (limits, "cached_peaks"), (environment, "capture")):
        monkeypatch.setattr(module, name, measured)
    env = json.loads((root / "cpu" / "results" / "env.json").read_text())
    # env.json is the run's last notebook's; each notebook's own capture time and harness overhead are kept apart
    mine = {"captured_at": "2026-01-02T03:04:05+00:00", "overhead": dict(env["overhead"], median=9.9e-7)}
    last = {"captured_at": "2026-01-02T09:00:00+00:00", "overhead": env["overhead"]}
    (root / "cpu" / "results" / "env.json").write_text(json.dumps(env | {"notebooks": {NB: mine, "07": last}}))
    ctx = study.start(NB, "cpu")
    assert ctx.recorded and ctx.peaks == env["peaks"] and ctx.env["fingerprint"] == env["fingerprint"]
    assert ctx.env["captured_at"] == mine["captured_at"] and ctx.overhead.median == 9.9e-7 and "notebooks" not in ctx.env
    from studylib.studies import eager_vs_compiled as s01

    configs = s01.configs(ctx.section, device=ctx.settings.device, threads=ctx.settings.threads)
    df = ctx.run(configs)
    assert len(df) == len(configs) and ctx.run_note.startswith("nothing measured")
    assert "other measurement settings" not in ctx.run_note  # the reference's settings are the profile's today
    table = root / "cpu" / "results" / f"{NB}.jsonl"
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    rows[0]["settings_hash"] = "0123456789"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ctx.run(configs)
    assert "; 1 of them with other measurement settings than the profile's today" in ctx.run_note
    with pytest.raises(study.WouldMeasure, match="not in the results"):
        ctx.run([*configs, dataclasses.replace(configs[0], batch_size=999)])
    with pytest.raises(study.WouldMeasure):
        ctx._measure(configs)
