"""Notebooks are committed clean, with a parameters cell that names the profile and its overrides (no copy of a
profile's values), then three cells, start, measure and answer, each re-run on its own; and they use no value they do
not define (the profile reaches them through study.start)."""

import ast
import builtins
import importlib
import inspect
import json
import symtable
from collections import defaultdict
from types import SimpleNamespace

import pandas as pd
import pytest

from studylib import new_study, study
from studylib.bench import profiles
from studylib.core import paths
from studylib.studies import STUDIES

NOTEBOOKS = list(STUDIES)


def _cells(name):
    return json.loads(paths.notebook_path(name).read_text())["cells"]


def _code(name) -> list[str]:
    return ["".join(c["source"]) for c in _cells(name) if c["cell_type"] == "code"]


def test_there_are_notebooks():
    assert "01_eager_vs_compiled" in NOTEBOOKS and paths.SUMMARY_NOTEBOOK not in NOTEBOOKS


def test_every_notebook_is_a_registered_study_and_every_study_has_its_notebook():
    files = {p.stem for p in paths.NOTEBOOKS_DIR.glob("*.ipynb")} - {paths.SUMMARY_NOTEBOOK}
    assert files == set(NOTEBOOKS)
    assert all(STUDIES[n].notebook_path.is_file() for n in NOTEBOOKS)


@pytest.mark.parametrize("name", [*NOTEBOOKS, paths.SUMMARY_NOTEBOOK])
def test_committed_without_outputs(name):
    for cell in _cells(name):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"{name} has outputs"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_parameters_cell_names_the_profile_its_overrides_and_force(name):
    """Three values, the ones `studylib run` injects (profiles.notebook_inputs): the smoke profile, no overrides, no
    forced re-measuring; the profile's own values live in its file only."""
    tagged = [c for c in _cells(name) if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1
    values = {}
    for node in ast.parse("".join(tagged[0]["source"])).body:
        assert isinstance(node, ast.Assign), "the parameters cell holds plain assignments only"
        values[node.targets[0].id] = ast.literal_eval(node.value)
    assert values == {"profile": "smoke", "overrides": {}, "force": False}
    assert values == profiles.notebook_inputs(profiles.load("smoke"))


def test_the_summary_takes_only_which_profiles_to_show():
    tagged = [c for c in _cells(paths.SUMMARY_NOTEBOOK) if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1
    tree = ast.parse("".join(tagged[0]["source"]))
    assert [(n.targets[0].id, ast.literal_eval(n.value)) for n in tree.body] == [("profiles", None)]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_study_notebook_hands_its_parameters_to_study_start_and_shares_the_common_cells(name):
    """The notebook contract: study.start receives the profile, the overrides and force by name (no globals() to pick
    them from, so a deleted line cannot keep its old value in a live kernel), and the cells every page ends with are
    StudyRun methods, called once each."""
    code = _code(name)
    starts = [c for c in code if "study.start(" in c]
    assert len(starts) == 1 and "profile, overrides=overrides, force=force" in starts[0]
    assert not any("globals()" in c for c in code)
    for call in ("ctx.what_ran()", "ctx.findings(", "ctx.surprises(df)", "ctx.claims(", "ctx.gpu_note(df)"):
        assert sum(call in c for c in code) == 1, call
    assert not any("seed_claims" in c or "gpu_paths." in c or "surprises.html" in c for c in code)


# The three steps after the parameters cell, each a cell of its own, and the call that makes each.
CALLS = {"start": "study.start(", "measure": "ctx.run(", "answer": "ctx.answer("}


def _steps(name) -> list[str]:
    """The sources of the three code cells after the parameters cell."""
    cells = _cells(name)
    at = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    assert all(c["cell_type"] == "code" for c in cells[at + 1:at + 4])
    return ["".join(c["source"]) for c in cells[at + 1:at + 4]]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_start_measure_and_answer_are_three_cells_after_the_parameters(name):
    """Right after the parameters cell: start (study.start), measure (ctx.run), answer (analyse and ctx.answer), in that
    order, each call in its own cell only, each cell opening with the one comment line new-study writes too, saying
    what re-running it does."""
    steps = _steps(name)
    for source, (step, call) in zip(steps, CALLS.items()):
        lines = source.splitlines()
        assert lines[0] == new_study.STEPS[step] and not lines[1].startswith("#"), (step, lines[:2])
        assert [c for c in CALLS.values() if c in source] == [call], step
    assert ".analyse(df" in steps[2]
    code = _code(name)
    assert all(sum(call in c for c in code) == 1 for call in CALLS.values())


class _Kernel:
    """The library behind the three cells, recording what each call did: study.start returns this as `ctx`; its
    `run` and `answer` and the study's `analyse` only record (the grid is the smoke profile's, built for real)."""

    def __init__(self, name, monkeypatch):
        self.calls, self.df = [], pd.DataFrame()
        loaded = profiles.load("smoke")
        self.section, self.settings, self.peaks = loaded.sections[name], loaded.settings_for(name), None
        self.verdicts = "the run's verdict table"  # what `run` decided: the answer cell hands it to analyse
        monkeypatch.setattr(study, "start", self.start)
        monkeypatch.setattr(importlib.import_module(STUDIES[name].analyse.__module__), "analyse", self.analyse)

    def start(self, notebook, profile, *, overrides=None, force=False, frameworks=None):
        self.calls.append(("start", profile, overrides, force))
        return self

    def text_data(self):
        self.calls.append("text_data")
        return None, "the text workloads"

    def run(self, configs, workloads=None):
        assert configs and workloads in (None, "the text workloads")
        self.calls.append("run")
        return self.df

    def analyse(self, df, peaks=None, *, vt):
        assert df is self.df and vt is self.verdicts
        self.calls.append("analyse")
        return SimpleNamespace(tables=defaultdict(pd.DataFrame), findings=[], claims=pd.DataFrame())

    def answer(self, df, why=""):
        assert df is self.df
        self.calls.append("answer")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_step_re_runs_alone_and_the_three_run_top_to_bottom(name, monkeypatch):
    """The cells run in order in one namespace (the parameters cell's values in it): start once with the parameters,
    then measure, then answer. Re-running measure measures again without reading the profile; re-running answer
    analyses and answers again, measuring nothing."""
    kernel = _Kernel(name, monkeypatch)
    start, measure, answer = (compile("\n".join(line for line in s.splitlines() if not line.startswith("%")),
                                      f"<{name}: {step}>", "exec") for s, step in zip(_steps(name), CALLS))
    namespace = {"profile": "smoke", "overrides": {"batch_sizes": [1]}, "force": False}
    for cell in (start, measure, answer):
        exec(cell, namespace)
    text = ["text_data"] if "ctx.text_data()" in _steps(name)[1] else []
    assert kernel.calls == [("start", "smoke", {"batch_sizes": [1]}, False), *text, "run", "analyse", "answer"]
    kernel.calls.clear()
    exec(answer, namespace)
    assert kernel.calls == ["analyse", "answer"]
    kernel.calls.clear()
    exec(measure, namespace)
    assert kernel.calls == [*text, "run"]


def _undefined(source: str) -> set[str]:
    """Names a notebook's code reads that none of its cells defines (nor Python's builtins)."""
    table = symtable.symtable(source, "<notebook>", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    read, tables = set(), [table]
    while tables:
        t = tables.pop()
        read |= {s.get_name() for s in t.get_symbols() if s.is_referenced() and (t is table or s.is_global())}
        tables += t.get_children()
    return read - defined - set(dir(builtins))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_study_notebook_reads_no_value_it_does_not_define(name):
    """Every setting comes through `ctx` (ctx.section, ctx.settings): a cell that read a profile value as a bare name
    would work only where something else had put it among the kernel's globals."""
    code = "\n".join(line for c in _code(name) for line in c.splitlines() if not line.lstrip().startswith("%"))
    assert _undefined(code) == set()
    assert _undefined(code + "\nprint(batch_sizes)") == {"batch_sizes"}  # the check sees a bare profile value


def test_study_start_picks_nothing_out_of_globals():
    assert "globals()" not in inspect.getsource(study)
    assert list(inspect.signature(study.start).parameters) == ["notebook", "profile", "overrides", "force",
                                                               "frameworks"]
