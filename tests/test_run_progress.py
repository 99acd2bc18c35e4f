"""The run's one display (issue 48): study, phase, configurations done of total and time left, moving in every phase
(early passes, notebooks, the summary, render); a line redrawn in place on a terminal, one plain line per phase
elsewhere; a summary line per study at the end; no kernel transport or cell-id warning.

The measuring is faked (part files and result rows written by recorders, a fake clock); one tiny two-cell notebook
runs in a real kernel to check the warnings."""

import io
import json
import warnings

import nbformat
import pytest

from studylib import notebooks, run
from studylib.bench import profiles
from studylib.core import paths, study_registry
from studylib.report import progress

SMOKE = "smoke"
ONE, TWO = "01_eager_vs_compiled", "02_torchscript_vs_xla"  # smoke: one replicate, two replicates


def test_time_left_is_plans_estimate_corrected_by_the_rate_so_far():
    work = {"a": progress.StudyWork(total=10, estimate_s=100.0), "b": progress.StudyWork(total=4, estimate_s=100.0)}
    assert progress.time_left_s(work, 0.0) == pytest.approx(200.0)  # nothing ran: plan's estimate
    work["a"].done = 5  # half of a (50 s of the estimate) took 100 s: the rest is expected twice as slow, shrunk
    prior = progress.PRIOR_SHARE * 200
    assert progress.time_left_s(work, 100.0) == pytest.approx(150.0 * (100 + prior) / (50 + prior))
    work["a"].finished = True  # a's notebook ended: its whole estimate counts as spent, whatever it left
    assert progress.time_left_s(work, 100.0) == pytest.approx(100.0 * (100 + prior) / (100 + prior))
    assert progress.time_left_s({"a": progress.StudyWork(0, 0.0)}, 5.0) is None  # nothing left to measure


def test_plain_output_is_one_line_per_phase_without_carriage_returns(fake_clock):
    clock, out = fake_clock([30.0]), io.StringIO()
    work = {ONE: progress.StudyWork(total=4, estimate_s=60.0), TWO: progress.StudyWork(total=6, estimate_s=120.0)}
    with progress.RunProgress("cpu", work, stream=out, terminal=False, clock=clock) as display:
        display.start(TWO, "early pass 1 of 1")
        clock.work()
        display.update(TWO, 3)
        display.cell(3, 9)  # moves the state, not the log
        display.start(TWO, "notebook (replicate 2 of 2)")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 2
    assert lines[0] == (f"[cpu] {TWO} (study 2 of 2) · early pass 1 of 1 · [................] 0/6 configurations × "
                        f"replicates measured · 0:00 elapsed, about 3 min left")
    assert lines[1].startswith(f"[cpu] {TWO} (study 2 of 2) · notebook (replicate 2 of 2) · "
                               f"[########........] 3/6 configurations × replicates measured · 0:01 elapsed")


def test_a_terminal_gets_one_line_redrawn_in_place(fake_clock, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # the terminal's width: the whole line fits
    clock, out = fake_clock([90.0]), io.StringIO()
    work = {ONE: progress.StudyWork(total=4, estimate_s=60.0)}
    with progress.RunProgress("cpu", work, stream=out, terminal=True, clock=clock) as display:
        display.start(ONE, "notebook")
        clock.work()
        display.update(ONE, 2)
        display.cell(5, 20)
        display.write("01: a message that stays")
    text = out.getvalue()
    assert "\r" in text and "01: a message that stays\n" in text
    shown = [s for s in text.replace("\n", "\r").split("\r") if s.strip()]
    assert f"[cpu] {ONE} (study 1 of 1) · notebook, cell 5 of 20 · [########........] 2/4 configurations × " \
           "replicates measured · 0:01 elapsed, " in "".join(shown)


def test_a_narrow_terminal_keeps_the_count_and_the_time_left(fake_clock):
    clock = fake_clock([0.0], first=312.0)
    work = {"03_onnx_batching": progress.StudyWork(total=72, estimate_s=600.0, done=48)}
    display = progress.RunProgress("cpu", work, stream=io.StringIO(), terminal=False, clock=clock)
    clock.work()
    display.study, display.phase, display.detail = "03_onnx_batching", "notebook (replicate 3 of 3)", "cell 12 of 25"
    assert len(display.line()) > 100
    narrow = display.line(100)
    assert len(narrow) == 100
    assert narrow.startswith("03_onnx_batching (1/1) · 48/72 measured · 5:12 elapsed, about 3 min left · notebook")


def _fake_run(monkeypatch, outputs, loaded):
    """Recorders for the early passes (part files), the notebooks (result rows, cells) and the render (files)."""
    events = []

    def early(cmd, **kw):
        notebook, replicate = cmd[4], int(cmd[5])
        parts = paths.parts_dir(loaded.name, notebook)
        parts.mkdir(parents=True, exist_ok=True)
        rows = [{"config_key": c.key} for c in study_registry.grid(loaded, notebook)]
        (parts / f"x.r{replicate}.json").write_text(json.dumps({"rows": rows}))
        events.append(("early", notebook, replicate))
        return run.subprocess.CompletedProcess(cmd, 0)

    def execute(loaded_, notebook, *, force=False, display=None):
        keys = [c.key for c in study_registry.grid(loaded, notebook)]
        for i in range(1, 4):
            display.cell(i, 3)
        for p in paths.parts_dir(loaded.name, notebook).glob("*.json"):
            p.unlink()
        table = paths.results_dir(loaded.name) / f"{notebook}.jsonl"
        table.parent.mkdir(parents=True, exist_ok=True)
        with table.open("a") as f:
            for i, key in enumerate(keys):
                f.write(json.dumps({"config_key": key, "status": ["ok", "skipped", "error"][min(i, 2)]}) + "\n")
        paths.executed_dir(loaded.name).mkdir(parents=True, exist_ok=True)
        (paths.executed_dir(loaded.name) / f"{notebook}.ipynb").write_text("{}")
        events.append(("notebook", notebook))
        return {"notebook": notebook, "status": "ok", "duration_s": 90.0, "failed_cell": None, "error": None}

    def page(executed, out):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("<html></html>")
        events.append(("render", executed.stem))
        return out

    from studylib.report import render

    monkeypatch.setattr(run.subprocess, "run", early)
    monkeypatch.setattr(run, "execute", execute)
    monkeypatch.setattr(run, "planned", lambda loaded_, nb, force=False: (study_registry.grid(loaded, nb),) * 2)
    monkeypatch.setattr(run, "run_summary", lambda say, on_cell: on_cell(1, 1) or 0)
    monkeypatch.setattr(render, "notebook_html", page)
    monkeypatch.setattr(render, "render_summary", lambda: [])
    monkeypatch.setattr(render, "index", lambda: outputs / "index.html")
    return events


@pytest.mark.parametrize("terminal", [False, True])
def test_a_run_shows_every_phase_and_ends_with_a_line_per_study(outputs, monkeypatch, fake_clock, terminal):
    monkeypatch.setenv("COLUMNS", "400")  # a wide terminal: whole lines
    loaded = profiles.load(SMOKE)
    events = _fake_run(monkeypatch, outputs, loaded)
    out = io.StringIO()
    assert run.run(SMOKE, [ONE, TWO], render=True, stream=out, terminal=terminal, clock=fake_clock([1.0])) == 0
    assert [e[0] for e in events] == ["early", "notebook", "notebook", "render", "render"]
    text = out.getvalue()
    n1, n2 = (len(study_registry.grid(loaded, nb)) for nb in (ONE, TWO))
    phases = [f"[smoke] {TWO} (study 2 of 2) · early pass 1 of 1 · [................] 0/{2 * n2} configurations",
              f"[smoke] {ONE} (study 1 of 2) · notebook · [................] 0/{n1} "
              f"configurations", f"[smoke] {TWO} (study 2 of 2) · notebook (replicate 2 of 2) · "
              f"[########........] {n2}/{2 * n2} configurations", "[smoke] 06_summary · notebook (across profiles)",
              f"[smoke] {ONE} (study 1 of 2) · render (page 1 of 2)",
              f"[smoke] {TWO} (study 2 of 2) · render (page 2 of 2)",
              "[smoke] 06_summary · render (the summary's page and the index)"]
    if terminal:  # a line redrawn in place; moved by the notebook's cells
        assert "\r" in text and "notebook (replicate 2 of 2), cell 3 of 3" in text
        assert all(p in text for p in phases), text
    else:
        assert "\r" not in text
        lines = text.splitlines()
        assert [ln for ln in lines if ln.startswith("[smoke]")] == [
            next(ln for ln in lines if ln.startswith(p)) for p in phases]  # one line per phase, in order
        assert all(" elapsed, " in ln for ln in lines if ln.startswith("[smoke]"))
    for nb, n in ((ONE, n1), (TWO, n2)):
        summary = next(ln for ln in text.splitlines() if ln.startswith(f"{nb}: {n} configurations: "))
        assert f": 1 ok, 1 skipped, {n - 2} failed · 1.5 min · page " in summary
        assert summary.endswith(str(paths.html_dir(SMOKE) / f"{nb}.html"))
    assert "without encryption" not in text and "MissingIDFieldWarning" not in text


def test_without_render_the_summary_names_the_executed_notebook(outputs, monkeypatch, fake_clock):
    loaded = profiles.load(SMOKE)
    _fake_run(monkeypatch, outputs, loaded)
    out = io.StringIO()
    assert run.run(SMOKE, [ONE], stream=out, terminal=False, clock=fake_clock([1.0])) == 0
    last = out.getvalue().splitlines()[-1]
    assert last.startswith(f"{ONE}: ") and f"executed {paths.executed_dir(SMOKE) / ONE}.ipynb" in last
    assert "`studylib report` writes its page" in last


@pytest.mark.parametrize("path", notebooks.committed(), ids=lambda p: p.name)
def test_every_committed_notebook_is_valid_has_cell_ids_and_no_outputs(path):
    assert notebooks.problems(path) == []
    nb = nbformat.read(path, as_version=4)
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids) and all(ids)


def _stored(tmp_path, minor: int, ids: list, outputs: bool = False):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "a"},
             {"cell_type": "code", "metadata": {}, "source": "1", "execution_count": 3 if outputs else None,
              "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}] if outputs else []}]
    for cell, cell_id in zip(cells, ids, strict=True):
        if cell_id:
            cell["id"] = cell_id
    path = tmp_path / f"nb{minor}.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": minor}))
    return path


def test_normalise_adds_missing_ids_keeps_the_others_and_clears_outputs(tmp_path):
    path = _stored(tmp_path, 5, ["c01", None], outputs=True)
    assert notebooks.problems(path) == ["cell 1 has no id", "cell 1 has outputs"]
    assert notebooks.normalise(path) is True
    assert notebooks.problems(path) == []
    fixed = json.loads(path.read_text())
    assert [c["id"] for c in fixed["cells"]] == ["c01", "c02"] and fixed["cells"][1]["outputs"] == []
    assert notebooks.normalise(path) is False  # already normalised: the file is left alone


def test_normalise_moves_an_older_notebook_to_nbformat_4_5(tmp_path):
    path = _stored(tmp_path, 4, [None, None])
    assert notebooks.problems(path) == ["nbformat 4.4 (cell ids need 4.5)", "cell 0 has no id", "cell 1 has no id"]
    assert notebooks.normalise(path) is True and notebooks.problems(path) == []
    fixed = json.loads(path.read_text())
    assert [c["id"] for c in fixed["cells"]] == ["c00", "c01"] and fixed["nbformat_minor"] == 5


def test_a_notebook_runs_without_the_transport_or_the_cell_id_warning(tmp_path, capfd):
    """A real kernel, two cells: the kernel's own stderr reaches the captured output (the marker), its transport
    warning does not, and reading and writing the notebook warns about no cell id."""
    cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("import sys; print('kernel-stderr-marker', x, file=sys.__stderr__)")]
    source, out = tmp_path / "tiny.ipynb", tmp_path / "out.ipynb"
    kernelspec = {"name": run.kernel_name(), "language": "python", "display_name": "Python"}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), source)
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        notebooks.execute(source, out, {"x": 2}, kernel_name=run.kernel_name(), on_cell=lambda i, n: seen.append(i))
    captured = capfd.readouterr()
    assert "kernel-stderr-marker 2" in captured.err
    assert "without encryption" not in captured.err + captured.out
    assert not [w for w in caught if issubclass(w.category, nbformat.validator.MissingIDFieldWarning)]
    assert seen == [1, 2, 3]  # the injected parameters cell, then the notebook's two
    assert json.loads(out.read_text())["metadata"]["papermill"]["parameters"] == {"x": 2}
