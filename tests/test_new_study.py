"""`python -m studylib new-study NAME` in a temporary copy of the repository (the real tree is never written): the study
it writes is registered, planned in the smoke profiles, linted, and passes the house's notebook and layer tests; a bad
or taken NAME exits 2 with one line and writes nothing. Its notebook executed and rendered end to end is marked `full`
(the notebook alone took about 80 s on the 2-core host: the machine's limits measured in a fresh outputs/, two cold
compiles, six configurations)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from answer_numbers import answer_numbers_missing
from studylib import new_study
from studylib.core import paths

NAME, MODULE = "08_speculative_decoding", "speculative_decoding"
PARTS = ("src", "notebooks", "params", "tests", "pyproject.toml")
# the house's tests that read every registered study (besides the end-to-end runs)
REGISTRY_TESTS = ("tests/test_notebooks.py", "tests/test_layers.py",
                  "tests/test_surprises.py::test_expectations_are_data_in_every_study",
                  "tests/test_figures.py::test_every_known_name_has_its_own_colour",
                  "tests/test_profiles.py::test_every_shipped_profile_validates_and_plans",
                  "tests/test_study_plugin.py::test_every_variant_a_built_in_study_accepts_is_a_registered_runtime_"
                  "with_a_known_family")


def _python(repo, *args, timeout=600):
    """`python *args` in the copy, importing its studylib (not the checkout's) and writing outputs under it."""
    env = dict(os.environ, PYTHONPATH=str(repo / "src"), STUDYLIB_OUTPUTS=str(repo / "outputs"), USE_TF="0")
    return subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def _files(repo) -> dict:
    return {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and "outputs" not in p.relative_to(repo).parts}


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory):
    """A copy of the repository's code, notebooks and profiles, with NAME scaffolded in it; and new-study's result."""
    repo = tmp_path_factory.mktemp("checkout")
    for part in PARTS:
        source = paths.ROOT / part
        if source.is_dir():
            shutil.copytree(source, repo / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, repo / part)
    where = _python(repo, "-c", "from studylib.core import paths; print(paths.ROOT)")
    assert where.stdout.strip() == str(repo), where  # else the scaffold would write into a real checkout
    made = _python(repo, "-m", "studylib", "new-study", NAME)
    assert made.returncode == 0, made.stderr
    return repo, made


@pytest.fixture
def repo(scaffolded):
    return scaffolded[0]


def test_it_writes_a_module_a_notebook_and_its_profile_sections(scaffolded):
    repo, made = scaffolded
    listed = [line.strip() for line in made.stdout.splitlines()[1:-1]]
    assert listed == [f"src/studylib/studies/{MODULE}.py", f"src/studylib/templates/studies/{NAME}/findings.md",
                      f"notebooks/{NAME}.ipynb", "params/smoke.yaml", "params/smoke-fast.yaml", "params/cpu.yaml"]
    # nothing else is edited: the study registers itself, its variants are the registry's, its words its templates'
    changed = {str(p) for p, data in _files(repo).items() if (paths.ROOT / p).is_file()
               and (paths.ROOT / p).read_bytes() != data}
    assert changed == {"params/smoke.yaml", "params/smoke-fast.yaml", "params/cpu.yaml"}, changed
    module = (repo / f"src/studylib/studies/{MODULE}.py").read_text()
    assert "register(Study(" in module and "Comparison(" in module and "TODO" in module
    assert 'macro(WORDS, "speedup"' in module and " over eager (" not in module  # its sentence is its template's
    assert "over eager ({{ verdict }})." in (repo / f"src/studylib/templates/studies/{NAME}/findings.md").read_text()
    for profile in ("smoke", paths.FAST_SMOKE):
        section = yaml.safe_load((repo / "params" / f"{profile}.yaml").read_text())["notebooks"][NAME]
        assert section == new_study.SECTION | {"left_out": section["left_out"]} and section["left_out"]
    cpu = (repo / "params/cpu.yaml").read_text()
    assert NAME not in yaml.safe_load(cpu)["notebooks"] and f"  # {NAME}:\n" in cpu  # commented out
    cells = json.loads((repo / "notebooks" / f"{NAME}.ipynb").read_text())["cells"]
    assert cells[0]["source"][0].startswith("# 08 · Speculative decoding")
    assert any("ctx.answer(df)" in "".join(c["source"]) for c in cells)
    # the parameters cell names the profile and its overrides, which study.start receives
    params = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and "".join(params[0]["source"]) == new_study.PARAMETERS
    assert any("study.start(s08.NOTEBOOK, profile, overrides=overrides, force=force)" in "".join(c["source"])
               for c in cells)
    # the question, the parameters, then start, measure and answer: each step a cell, saying what re-running it does
    assert [c["id"] for c in cells[:5]] == ["c00", "c01", "c02", "measure", "answer"]
    assert [c["source"][0].rstrip("\n") for c in cells[2:5]] == list(new_study.STEPS.values())
    # the checkout this test runs from is untouched
    assert not (paths.ROOT / "src/studylib/studies" / f"{MODULE}.py").exists()
    assert not (paths.ROOT / "src/studylib/templates/studies" / NAME).exists()
    assert not paths.notebook_path(NAME).exists()


def test_plan_lists_its_configurations(repo):
    out = _python(repo, "-m", "studylib", "plan", "--profile", paths.FAST_SMOKE)
    assert out.returncode == 0, out.stderr
    threads = yaml.safe_load((repo / "params" / f"{paths.FAST_SMOKE}.yaml").read_text())["threads"]
    keys = [f"bert-tiny|{v}|cpu|fp32|b{b}|s16|t{threads}" for b in new_study.SECTION["batch_sizes"]
            for v in ("eager", "eager-aa", "compile-default")]
    assert f"{NAME}: {len(keys)} configurations" in out.stdout
    assert all(f"todo  {k}" in out.stdout for k in keys), out.stdout


def test_it_passes_the_house_checks(repo):
    """ruff, the committed-notebook check and the house's tests that read every registered study, run in the copy,
    cover it."""
    lint = _python(repo, "-m", "ruff", "check", "src", "tests")
    assert lint.returncode == 0, lint.stdout
    clean = _python(repo, "-m", "studylib.notebooks", "--check")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    tests = _python(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *REGISTRY_TESTS)
    assert tests.returncode == 0, tests.stdout[-3000:]
    for check in ("test_the_parameters_cell_names_the_profile_its_overrides_and_force",
                  "test_a_study_notebook_hands_its_parameters_to_study_start_and_shares_the_common_cells",
                  "test_start_measure_and_answer_are_three_cells_after_the_parameters",
                  "test_each_step_re_runs_alone_and_the_three_run_top_to_bottom",
                  "test_a_study_notebook_reads_no_value_it_does_not_define"):
        assert f"PASSED tests/test_notebooks.py::{check}[{NAME}]" in tests.stdout
    assert tests.stdout.count("PASSED") >= len(REGISTRY_TESTS)


def test_a_taken_or_malformed_name_exits_2_with_one_line_and_writes_nothing(repo):
    before = _files(repo)
    for name, why in ((NAME, "number 08 is taken by 08_speculative_decoding"), ("7_text", "must be two digits")):
        out = _python(repo, "-m", "studylib", "new-study", name)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and why in out.stderr, out.stderr
    assert _files(repo) == before


@pytest.mark.parametrize("name, title, why", [
    ("07_other", None, "number 07 is taken by 07_text_generation; the next free one is 09"),
    ("06_charts", None, "number 06 is taken by 06_summary"),
    ("09_eager_vs_compiled", None, "src/studylib/studies/eager_vs_compiled.py exists"),
    ("09_common", None, "cannot name a study module"),
    ("09_class", None, "cannot name a study module"),
    ("09_Text", None, "must be two digits, an underscore and lowercase words"),
    ("09-text", None, "must be two digits"),
    ("009_text", None, "must be two digits"),
    ("09_" + "_".join(["word"] * 7), None, "at most 32 characters"),
    ("09_text", "  ", "--title: must be 1 to 80 characters"),
    ("09_text", "A \"quoted\" title", "without double quotes"),
])
def test_names_it_refuses(repo, name, title, why):
    with pytest.raises(new_study.Refused, match=why):
        new_study.check(name, title, repo)


def test_a_free_name_gets_its_module_and_title():
    assert new_study.check("08_speculative_decoding", None, paths.ROOT) == ("speculative_decoding",
                                                                            "Speculative decoding")
    assert new_study.check("08_llm", " Decoding  speed ", paths.ROOT) == ("llm", "Decoding speed")


@pytest.mark.e2e
@pytest.mark.full  # about 1.5-2 minutes on the 2-core host: over the minute make test allows a single test
def test_its_notebook_runs_and_its_page_opens_with_a_decision_table_and_an_answer(repo):
    out = _python(repo, "-m", "studylib", "run", "--report", "--profile", paths.FAST_SMOKE, "--notebook", NAME,
                  timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    profile = repo / "outputs" / paths.FAST_SMOKE
    rows = [json.loads(line) for line in (profile / "results" / f"{NAME}.jsonl").read_text().splitlines()]
    assert {(r["variant"], r["batch_size"], r["status"]) for r in rows} == {
        (v, b, "ok") for v in ("eager", "eager-aa", "compile-default") for b in new_study.SECTION["batch_sizes"]}
    executed = json.loads((profile / "executed" / f"{NAME}.ipynb").read_text())
    assert not [o for c in executed["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    page = (profile / "html" / f"{NAME}.html").read_text()
    assert page.index('<div class="answer"') < page.index("<h2>Decision table</h2>") and "compile-default" in page
    missing, checked = answer_numbers_missing(page)  # as the end-to-end test checks every built-in study's page
    assert checked > 0 and not missing, missing
