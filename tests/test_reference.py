"""The committed reference: only `make reference` writes reference/, only from a clean commit; runs leave git clean."""

import json
import subprocess

import pytest

from conftest import cli, stored_row
from studylib import reference
from studylib.core import paths
from studylib.stats.results import ResultsTable


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A throw-away git checkout standing in for the project (paths.ROOT points at it)."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "README.md").write_text("study\n")
    (root / ".gitignore").write_text("/outputs/\n")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.setattr(paths, "ROOT", root)
    return root


def test_a_clean_tree_gives_its_commit_and_ignored_outputs_do_not_count(repo):
    (repo / "outputs" / "cpu").mkdir(parents=True)
    (repo / "outputs" / "cpu" / "run.json").write_text("{}")
    assert reference.clean_head() == _git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize("change", ["modified", "untracked"])
def test_a_dirty_tree_is_refused_naming_the_file(repo, change):
    if change == "modified":
        (repo / "README.md").write_text("edited\n")
    else:
        (repo / "notes.txt").write_text("new\n")
    with pytest.raises(reference.NotClean, match="README.md" if change == "modified" else "notes.txt"):
        reference.clean_head()


def test_make_reference_on_a_dirty_tree_exits_2_with_one_line_and_writes_nothing(repo, outputs):
    (repo / "README.md").write_text("edited\n")
    result = cli("reference", outputs=outputs)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "clean commit" in result.stderr
    assert not (repo / "reference").exists() and not (repo / "outputs").exists()


def _staged_run(root):
    """An outputs root as a finished `cpu` run leaves it, with the files that must not be published."""
    results = root / "cpu" / "results"
    results.mkdir(parents=True)
    table = ResultsTable(results / "01_eager_vs_compiled.jsonl")
    table.append(stored_row("k1"))
    (results / "env.json").write_text("{}")
    (results / "01_eager_vs_compiled.parts").mkdir()
    for rel in ("cpu/run.json", "cpu/html/01_eager_vs_compiled.html", "cpu/executed/01_eager_vs_compiled.ipynb",
                "cpu/results/01_eager_vs_compiled.verdicts.csv",
                "cpu/cache/onnx/model.onnx", "summary/run.json", "summary/html/06_summary.html",
                "summary/executed/06_summary.ipynb", "index.html"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")


def test_publish_copies_what_readers_need_and_nothing_else(tmp_path):
    staging, target = tmp_path / "staging", tmp_path / "reference"
    _staged_run(staging)
    (target / "cpu" / "results").mkdir(parents=True)
    (target / "cpu" / "results" / "gone.jsonl").write_text("old")  # a table the new run no longer has
    written = reference.publish(staging, target, {"commit": "abc"})
    got = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert got == ["REFERENCE.json", "cpu/html/01_eager_vs_compiled.html", "cpu/results/01_eager_vs_compiled.csv",
                   "cpu/results/01_eager_vs_compiled.jsonl", "cpu/results/01_eager_vs_compiled.verdicts.csv",
                   "cpu/results/env.json", "cpu/run.json", "index.html",
                   "summary/html/06_summary.html", "summary/run.json"]
    assert sorted(written) == sorted(p for p in target.rglob("*") if p.is_file())
    assert json.loads((target / "REFERENCE.json").read_text()) == {"commit": "abc"}


def test_another_profile_is_published_beside_the_committed_ones_with_its_own_record(tmp_path):
    """`make reference PROFILE=seeds`: reference/seeds/ and its record are written, the summary and index replaced
    (the run rendered them with the committed cpu carried in), and reference/cpu/ with its record kept."""
    staging, target = tmp_path / "staging", tmp_path / "reference"
    _staged_run(staging)
    (staging / "cpu").rename(staging / "seeds")
    (target / "cpu" / "results").mkdir(parents=True)
    (target / "cpu" / "results" / "01_eager_vs_compiled.jsonl").write_text("committed")
    (target / "REFERENCE.json").write_text('{"commit": "cpu-commit"}')
    (target / "index.html").write_text("old index")
    reference.publish(staging, target, {"commit": "abc", "profile": "seeds"}, "seeds")
    got = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert got == ["REFERENCE.json", "cpu/results/01_eager_vs_compiled.jsonl", "index.html",
                   "seeds/REFERENCE.json", "seeds/html/01_eager_vs_compiled.html",
                   "seeds/results/01_eager_vs_compiled.csv", "seeds/results/01_eager_vs_compiled.jsonl",
                   "seeds/results/01_eager_vs_compiled.verdicts.csv", "seeds/results/env.json", "seeds/run.json",
                   "summary/html/06_summary.html", "summary/run.json"]
    assert (target / "cpu" / "results" / "01_eager_vs_compiled.jsonl").read_text() == "committed"
    assert json.loads((target / "REFERENCE.json").read_text()) == {"commit": "cpu-commit"}
    assert json.loads((target / "seeds" / "REFERENCE.json").read_text())["profile"] == "seeds"
    assert (target / "index.html").read_text() == "x"


def test_the_committed_profiles_are_carried_into_another_profiles_run_so_its_summary_and_index_cover_them(tmp_path):
    target, staging = tmp_path / "reference", tmp_path / "staging"
    for rel in ("cpu/results/01.jsonl", "cpu/html/01.html", "cpu/run.json", "summary/run.json",
                "seeds/results/01.jsonl", "REFERENCE.json", "seeds/REFERENCE.json", "gpu-t4/notes.txt"):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text("x")
    assert reference.carry_committed(target, staging, "seeds") == ["cpu"]  # not itself, the summary, or a non-profile
    assert sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file()) == [
        "cpu/html/01.html", "cpu/results/01.jsonl", "cpu/run.json"]
    assert reference.carry_committed(target, staging, "seeds") == []  # already there: a resumed run keeps it
    assert reference.staging_root("seeds") != reference.staging_root() == reference.staging_root("cpu")


def test_make_reference_of_an_unknown_profile_exits_2_with_one_line(outputs):
    result = cli("reference", "--profile", "no-such-profile", outputs=outputs)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no-such-profile" in result.stderr


def test_the_committed_reference_records_its_commit_and_profile():
    record = json.loads((paths.reference_root() / reference.RECORD).read_text())
    assert record["profile"] == reference.PROFILE
    assert len(record["commit"]) == 40
    assert (paths.reference_root() / reference.PROFILE / "results" / "env.json").is_file()


def test_display_paths_are_never_absolute(tmp_path, outputs):
    assert paths.display(outputs / "cpu" / "results" / "x.jsonl") == "cpu/results/x.jsonl"
    assert paths.display(paths.ROOT / "reference" / "cpu") == "reference/cpu"
    assert paths.display(tmp_path / "elsewhere" / "file.txt") == "file.txt"



def test_each_committed_study_has_its_verdict_table_and_it_is_what_its_results_give():
    """Every study of the committed reference carries results/<study>.verdicts.csv, the table its pages were
    rendered from, and today's code computes the same decisions from the committed results."""
    import numpy as np

    import studylib.studies  # noqa: F401 - registers the studies
    from studylib.stats import verdicts

    results = paths.reference_root() / reference.PROFILE / "results"
    studies = sorted(p.stem for p in results.glob("*.jsonl"))
    assert studies, "the reference holds no results"
    for nb in studies:
        saved = verdicts.load(verdicts.path_for(results, nb))
        assert len(saved) > 0, nb
        df = ResultsTable(results / f"{nb}.jsonl").frame(with_samples=True)
        again = verdicts.for_study(nb, df)
        key = lambda v: (v.kind, v.comparison, v.shape, v.candidate)  # noqa: E731
        assert sorted(map(key, saved)) == sorted(map(key, again)), nb
        for a, b in zip(sorted(saved, key=key), sorted(again, key=key)):
            assert a.decision == b.decision, (nb, key(a))
            assert (np.isnan(a.speedup) and np.isnan(b.speedup)) or a.speedup == pytest.approx(b.speedup, rel=1e-6)
