"""Notebooks are committed clean, with a parameters cell whose defaults are the smoke profile."""

import ast
import json

import pytest

from studylib.core import paths
from studylib.measurement import profiles
from studylib.studies import STUDIES

NOTEBOOKS = list(STUDIES)


def _cells(name):
    return json.loads(paths.notebook_path(name).read_text())["cells"]


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
def test_parameters_cell_defaults_are_the_smoke_profile(name):
    tagged = [c for c in _cells(name) if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1
    values = {}
    for node in ast.parse("".join(tagged[0]["source"])).body:
        assert isinstance(node, ast.Assign), "the parameters cell holds plain assignments only"
        values[node.targets[0].id] = ast.literal_eval(node.value)
    expected = profiles.notebook_parameters(profiles.load("smoke"), name) | {"force": False}
    assert values == expected


def test_the_summary_takes_only_which_profiles_to_show():
    tagged = [c for c in _cells(paths.SUMMARY_NOTEBOOK) if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1
    tree = ast.parse("".join(tagged[0]["source"]))
    assert [(n.targets[0].id, ast.literal_eval(n.value)) for n in tree.body] == [("profiles", None)]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_study_notebook_hands_its_globals_to_study_start_and_shares_the_common_cells(name):
    """The notebook contract (issue 31): study.start reads the parameters from the notebook's globals (no hand-written
    dict to forget one in), and the cells every page ends with are StudyRun methods, called once each."""
    code = ["".join(c["source"]) for c in _cells(name) if c["cell_type"] == "code"]
    starts = [c for c in code if "study.start(" in c]
    assert len(starts) == 1 and "globals()" in starts[0] and "dict(" not in starts[0]
    for call in ("ctx.what_ran()", "ctx.findings(", "ctx.surprises(df)", "ctx.claims(", "ctx.gpu_note(df)"):
        assert sum(call in c for c in code) == 1, call
    assert not any("seed_claims" in c or "gpu_paths." in c or "surprises.html" in c for c in code)


def test_study_start_picks_the_parameters_out_of_a_notebooks_globals():
    from studylib import study

    name = NOTEBOOKS[2]
    params = profiles.notebook_parameters(profiles.load("smoke"), name) | {"force": False}
    namespace = {"__name__": "__main__", "plots": object(), "ctx": None, "display": print, **params}
    assert study.parameters_in(name, namespace) == params
