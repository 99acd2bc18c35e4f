"""`studylib run`'s order: replicates 0 … k-2 of every notebook first, pass by pass, then the notebooks.

The measuring itself is replaced by recorders here; the smoke end-to-end test runs the real processes."""

import json
import os
import subprocess
import sys

import yaml

from conftest import seed_peaks
from studylib import run
from studylib.bench import profiles, replicates
from studylib.core import paths, study_registry
from studylib.core.files import read_json


def _recording(monkeypatch, fail: set[str] = frozenset()):
    events = []

    def early(cmd, **kw):
        notebook, replicate = cmd[4], int(cmd[5])
        events.append(("early", notebook, replicate, "--force" in cmd, os.environ.get(replicates.RUN_ID_VAR)))
        return subprocess.CompletedProcess(cmd, 1 if notebook in fail else 0)

    def execute(loaded, notebook, *, force=False, display=None):
        events.append(("notebook", notebook, force, os.environ.get(replicates.RUN_ID_VAR)))
        return {"notebook": notebook, "status": "ok", "duration_s": 1.0, "failed_cell": None, "error": None}

    monkeypatch.setattr(run.subprocess, "run", early)
    monkeypatch.setattr(run, "execute", execute)
    monkeypatch.setattr(run, "planned", lambda loaded, notebook, force=False: ([notebook], [notebook]))
    monkeypatch.setattr(run, "estimate_s", lambda loaded, notebook, configs: 60.0 * len(configs))
    monkeypatch.setattr(run, "run_summary", lambda *a: 0)
    return events


def test_every_notebooks_early_replicates_are_measured_before_any_notebook_runs(outputs, monkeypatch):
    events = _recording(monkeypatch)
    names = profiles.load("cpu").notebooks()
    k = profiles.load("cpu").measure_for(names[0]).replicates
    assert k == 3
    assert run.run("cpu", force=True) == 0
    run_ids = {e[-1] for e in events}
    assert len(run_ids) == 1 and None not in run_ids  # one run id, inherited by every process of the run
    assert os.environ.get(replicates.RUN_ID_VAR) is None  # and gone when the run ends
    assert [e[:-1] for e in events] == ([("early", nb, r, True) for r in range(k - 1) for nb in names]
                                       + [("notebook", nb, True) for nb in names])
    manifest = json.loads((outputs / "cpu" / "run.json").read_text())
    assert all(manifest[nb]["early_replicates_s"] >= 0 for nb in names)


def test_a_notebook_of_one_replicate_has_no_early_pass(outputs, monkeypatch):
    events = _recording(monkeypatch)
    smoke = profiles.load("smoke")
    one, two = "01_eager_vs_compiled", "02_torchscript_vs_xla"
    assert smoke.measure_for(one).replicates == 1 and smoke.measure_for(two).replicates == 2
    assert run.run("smoke", [one, two]) == 0
    assert [e[:-1] for e in events] == [("early", two, 0, False), ("notebook", one, False), ("notebook", two, False)]
    manifest = json.loads((outputs / "smoke" / "run.json").read_text())
    assert "early_replicates_s" not in manifest[one] and "early_replicates_s" in manifest[two]


def test_a_failed_early_pass_is_reported_and_its_notebook_still_runs(outputs, monkeypatch, capsys):
    events = _recording(monkeypatch, fail={"02_torchscript_vs_xla"})
    assert run.run("smoke", ["02_torchscript_vs_xla"]) == 0
    assert [e[0] for e in events] == ["early", "notebook"]
    assert "early pass of replicate 1 ended with exit code 1; the notebook measures what it left" in capsys.readouterr().err


def test_an_early_pass_process_leaves_one_replicate_in_parts_and_the_table_empty(outputs, tmp_path):
    """The real process (python -m studylib.study) on an outputs/ with no results: study 04 of smoke-fast with smoke's
    two replicates (a profile file of its own), replicate 0 of 2; the machine's limits recorded there are reused."""
    notebook = "04_sorted_length_batching"
    data = yaml.safe_load((paths.PARAMS_DIR / f"{paths.FAST_SMOKE}.yaml").read_text())
    data["measure"]["replicates"] = 2
    profile = tmp_path / "early.yaml"
    profile.write_text(yaml.safe_dump(data))
    loaded = profiles.load(str(profile))
    assert loaded.measure_for(notebook).replicates == 2
    peaks = seed_peaks(outputs, loaded.name, loaded.settings_for(notebook).threads)
    done = subprocess.run([sys.executable, "-m", "studylib.study", str(profile), notebook, "0"], capture_output=True,
                          text=True, env=os.environ | {replicates.RUN_ID_VAR: "run-x"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert read_json(outputs / loaded.name / "results" / "env.json")["peaks"] == peaks  # not measured again
    parts = sorted((outputs / loaded.name / "results" / f"{notebook}.parts").glob("*.json"))
    assert parts and all(p.name.endswith(".r0.json") for p in parts)
    rows = [row for p in parts for row in read_json(p)["rows"]]
    assert {r["config_key"] for r in rows} == {c.key for c in study_registry.grid(loaded, notebook)}
    assert all(read_json(p)["run_id"] == "run-x" for p in parts) and all(r["status"] == "ok" for r in rows)
    assert not (outputs / loaded.name / "results" / f"{notebook}.jsonl").exists()  # combined only with both replicates
