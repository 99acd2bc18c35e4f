"""`--set KEY=VALUE` on run, report and plan: overrides merged into the profile before validation, a profile of their
own (`<file>+<hash>`) under outputs/, and every bad override one line, exit 2, nothing written."""

import json
import os

import pytest
import yaml

from conftest import cli
from studylib import run
from studylib.bench import profiles
from studylib.core import paths

NB3 = "03_onnx_batching"


def _study_lines(plan_output: str, notebook: str) -> list[str]:
    """The configuration lines `plan` prints under one notebook."""
    block = plan_output.split(f"\n{notebook}: ", 1)[1].split("\n\n", 1)[0]
    return [line.split()[-1] for line in block.splitlines() if line.startswith(("  todo", "  done"))]


def test_an_override_changes_the_plan_of_its_study_only(outputs):
    plain = cli("plan", "--profile", "smoke-fast", outputs=outputs)
    changed = cli("plan", "--profile", "smoke-fast", "--set", "03.batch_sizes=[1]", outputs=outputs)
    assert plain.returncode == 0 and changed.returncode == 0, changed.stderr
    before, after = _study_lines(plain.stdout, NB3), _study_lines(changed.stdout, NB3)
    assert any("|b8|" in key for key in before)  # the file runs batch 8 in study 03 ...
    assert after and all("|b1|" in key for key in after)  # ... the override only batch 1
    assert after == [key for key in before if "|b1|" in key]
    for nb in ("01_eager_vs_compiled", "04_sorted_length_batching"):  # another study's section is untouched
        assert _study_lines(changed.stdout, nb) == _study_lines(plain.stdout, nb)
    name = profiles.load("smoke-fast", overrides=["03.batch_sizes=[1]"]).name
    assert f"profile {name}:" in changed.stdout and "--set 03_onnx_batching.batch_sizes=[1]" in changed.stdout
    assert not outputs.exists()


def test_overrides_are_validated_and_merged_like_the_file():
    base = profiles.load("smoke-fast")
    loaded = profiles.load("smoke-fast", overrides=["measure.replicates=2", "threads=2", f"{NB3}.models=[distilroberta-classifier]"])
    assert loaded.profile.measure.replicates == 2 and base.profile.measure.replicates == 1
    assert loaded.profile.measure.min_rounds == base.profile.measure.min_rounds  # merged key by key
    assert loaded.profile.threads == 2 and base.profile.threads == 1 and loaded.sections[NB3].models == ["distilroberta-classifier"]
    assert loaded.sections[NB3].variants == base.sections[NB3].variants


def test_an_overridden_profile_has_a_name_of_its_own_from_its_overrides():
    name = profiles.load("smoke-fast", overrides=["03.batch_sizes=[1]", "seed=3"]).name
    assert profiles.OVERRIDDEN_NAME.fullmatch(name) and name.startswith("smoke-fast+")
    # the same overrides however spelt or ordered (a key given twice: the last): the same name; other values: another
    assert profiles.load("smoke-fast", overrides=["seed=3", f"{NB3}.batch_sizes=[1]"]).name == name
    assert profiles.load("smoke-fast", overrides=["seed=2", "03.batch_sizes=[1]", "seed=3"]).name == name
    assert profiles.load("smoke-fast", overrides=["03.batch_sizes=[1]", "seed=4"]).name != name
    assert profiles.load("smoke-fast").name == "smoke-fast"


def _recording(monkeypatch):
    seen = []

    def early(cmd, **kw):
        seen.append(("early", cmd[3], cmd[4]))
        return run.subprocess.CompletedProcess(cmd, 0)

    def execute(loaded, notebook, *, force=False, display=None):
        seen.append(("notebook", profiles.notebook_inputs(loaded, force=force)))
        return {"notebook": notebook, "status": "ok", "duration_s": 1.0, "failed_cell": None, "error": None}

    monkeypatch.setattr(run.subprocess, "run", early)
    monkeypatch.setattr(run, "execute", execute)
    monkeypatch.setattr(run, "planned", lambda loaded, notebook, force=False: ([notebook], [notebook]))
    monkeypatch.setattr(run, "estimate_s", lambda loaded, notebook, configs: 60.0 * len(configs))
    monkeypatch.setattr(run, "run_summary", lambda *a: 0)
    return seen


def test_a_run_with_overrides_writes_to_its_own_folder_and_records_them(outputs, monkeypatch):
    seen = _recording(monkeypatch)
    nb = "02_torchscript_vs_xla"  # two replicates in smoke: an early pass in a process of its own
    assert run.run("smoke", [nb], overrides=["seed=7"]) == 0
    name = profiles.load("smoke", overrides=["seed=7"]).name
    assert sorted(p.name for p in outputs.iterdir()) == [name]  # nothing under outputs/smoke/
    manifest = json.loads(paths.manifest_path(name).read_text())
    assert manifest[profiles.OVERRIDES_KEY] == {"profile": "smoke", "set": ["seed=7"]}
    assert manifest[nb]["status"] == "ok"
    assert seen[0] == ("early", name, nb)  # the early pass loads the profile by its name, from that record
    params = seen[1][1]  # what papermill injects: the file, its overrides and force, nothing else
    assert params == {"profile": "smoke", "overrides": {"seed": 7}, "force": False}
    in_notebook = profiles.load(params["profile"], overrides=params["overrides"], notebook=nb)
    assert in_notebook.name == name and in_notebook.profile.seed == 7  # the notebook measures what the run planned
    again = profiles.load(name)
    assert again.name == name and again.profile.seed == 7 and again.overrides == tuple(
        manifest[profiles.OVERRIDES_KEY]["set"])
    assert profiles.describe_overrides(name) == "smoke with --set seed=7"
    assert profiles.describe_overrides("smoke") == ""


def test_the_index_names_the_overrides_and_lists_no_row_for_them(outputs, monkeypatch):
    from studylib.report import render

    _recording(monkeypatch)
    nb = "01_eager_vs_compiled"
    assert run.run("smoke-fast", [nb], overrides=["01.batch_sizes=[1]"]) == 0
    name = profiles.load("smoke-fast", overrides=["01.batch_sizes=[1]"]).name
    section = render._profile_section(outputs / name)
    assert f"smoke-fast with --set {nb}.batch_sizes=[1]" in section
    assert section.count("<tr") - section.count("<tr><th") == 1  # the notebook's row, none for the record


def test_a_name_with_a_hash_but_no_recorded_run_exits_2(outputs):
    r = cli("plan", "--profile", "smoke-fast+0123abcd", outputs=outputs)
    assert r.returncode == 2 and "no run recorded the overrides this name stands for" in r.stderr
    assert not outputs.exists()


BAD = {
    "no =": ("03.batch_sizes", "--set 03.batch_sizes: expected KEY=VALUE"),
    "no key": ("=[1]", "--set =[1]: expected KEY=VALUE"),
    "unknown study": ("09.batch_sizes=[1]", "--set 09.batch_sizes: '09' is neither a study"),
    "unknown profile-wide key": ("colour=blue", "--set colour: 'colour' is neither a study"),
    "unknown field": ("03.batch_size=[1]", f"--set 03.batch_size: notebooks.{NB3}.batch_size: unknown key"),
    "no field": ("03=[1]", "--set 03: name a field of 03_onnx_batching's section"),
    "bad value": ("03.batch_sizes=[0]", f"--set 03.batch_sizes: notebooks.{NB3}.batch_sizes: must be at least 1"),
    "wrong type": ("threads=two", "--set threads: threads: Input should be a valid integer (got 'two')"),
    "bad YAML": ("03.batch_sizes=[1,", "--set 03.batch_sizes: the value is not valid YAML"),
    "bad measurement setting": ("measure.replicates=0", "--set measure.replicates: measure.replicates: Input should"),
    "a variant the section's A/A copy needs": ("03.variants=[eager]", f"--set 03.variants: notebooks.{NB3}: aa:"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_override_exits_2_with_one_line_and_touches_nothing(case, outputs):
    text, expected = BAD[case]
    for command in ("run", "plan", "report"):
        r = cli(command, "--profile", "smoke-fast", "--set", "seed=1", "--set", text, outputs=outputs)
        assert r.returncode == 2, (command, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (command, lines)
    assert not outputs.exists()


def test_a_section_the_profile_lacks_and_an_auto_profile_cannot_be_overridden(tmp_path, outputs):
    data = yaml.safe_load((paths.PARAMS_DIR / "smoke-fast.yaml").read_text())
    del data["notebooks"]["05_keras_backends"]
    path = tmp_path / "four.yaml"
    path.write_text(yaml.safe_dump(data))
    r = cli("plan", "--profile", str(path), "--set", "05.batch_sizes=[1]", outputs=outputs)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--set 05.batch_sizes: the profile has no section for 05_keras_backends" in r.stderr
    r = cli("run", "--profile", "auto", "--set", "seed=1", outputs=outputs)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--set seed: params/auto.yaml is an auto profile" in r.stderr
    assert not outputs.exists()


def test_a_profile_given_as_a_path_takes_overrides_and_loads_again_by_name(tmp_path, outputs, monkeypatch):
    path = tmp_path / "mine.yaml"
    path.write_text((paths.PARAMS_DIR / "smoke-fast.yaml").read_text())
    _recording(monkeypatch)
    assert run.run(str(path), ["01_eager_vs_compiled"], overrides=["seed=5"]) == 0
    loaded = profiles.load(str(path), overrides=["seed=5"])
    assert loaded.name.startswith("mine+") and profiles.load(loaded.name).profile.seed == 5


# -- a notebook's `overrides`: the same keys, one study's fields without their prefix, and one cached loader ---------

NOTEBOOK_BAD = {
    "unknown key": ({"batch_size": [1, 4]}, f"overrides['batch_size']: unknown key 'batch_size': not a field of "
                                            f"{NB3}'s section"),
    "wrong type": ({"batch_sizes": "four"}, f"overrides['batch_sizes']: notebooks.{NB3}.batch_sizes: Input should be "
                                            "a valid list (got 'four')"),
    "wrong profile-wide type": ({"threads": "two"}, "overrides['threads']: threads: Input should be a valid integer"),
    "impossible value": ({"measure.replicates": 0}, f"overrides['measure.replicates']: notebooks.{NB3}.measure."
                                                    "replicates: Input should be greater than or equal to 1"),
    "not a mapping": ("batch_sizes=[1]", "overrides: must be a mapping of keys to values"),
}


@pytest.mark.parametrize("case", sorted(NOTEBOOK_BAD))
def test_a_bad_notebook_override_is_one_line_naming_its_key_and_touches_nothing(case, outputs):
    from studylib import study

    given, expected = NOTEBOOK_BAD[case]
    with pytest.raises(profiles.ProfileError) as e:
        study.start(NB3, "smoke", overrides=given)
    assert len(str(e.value).splitlines()) == 1 and expected in str(e.value), str(e.value)
    assert not outputs.exists()


def test_a_notebooks_overrides_name_the_profile_as_the_same_set_options_do():
    mine = profiles.load("smoke", overrides={"batch_sizes": [1, 4], "seed": 3}, notebook=NB3)
    assert mine.name == profiles.load("smoke", overrides=["03.batch_sizes=[1,4]", "seed=3"]).name
    assert mine.name == profiles.load("smoke", overrides={"03.batch_sizes": [1, 4], "seed": 3}).name
    assert mine.sections[NB3].batch_sizes == [1, 4] and mine.profile.seed == 3
    # in a notebook, `measure` is its own section's: it wins over the section's measure settings in the file
    budget = profiles.load("smoke", overrides={"measure.budget_s": 0.3}, notebook=NB3)
    assert budget.measure_for(NB3).budget_s == 0.3 and profiles.load("smoke").measure_for(NB3).budget_s != 0.3
    assert budget.profile.measure == profiles.load("smoke").profile.measure


def test_what_run_injects_loads_the_very_profile_it_planned(tmp_path):
    """The notebook receives the file and the overrides and loads them itself: the same name (outputs folder) and the
    same settings, hence the same settings hashes as the run's plan and early passes, also for a path and a float."""
    path = tmp_path / "mine.yaml"
    path.write_text((paths.PARAMS_DIR / "smoke-fast.yaml").read_text())
    sets = ["04.batch_sizes=[1]", f"{NB3}.measure.budget_s=0.25", "seed=2"]
    for profile in ("smoke-fast", str(path)):
        planned = profiles.load(profile, overrides=sets)
        inputs = profiles.notebook_inputs(planned, force=True)
        assert inputs["force"] is True and set(inputs) == {"profile", "overrides", "force"}
        loaded = profiles.load(inputs["profile"], overrides=inputs["overrides"], notebook=NB3)
        assert loaded.name == planned.name and loaded.settings_for(NB3) == planned.settings_for(NB3)
        assert loaded.sections == planned.sections


def test_the_loader_reads_a_file_once_per_modification_and_overrides(tmp_path, monkeypatch):
    path = tmp_path / "cached.yaml"
    path.write_text((paths.PARAMS_DIR / "smoke-fast.yaml").read_text())
    reads = []
    read = profiles._read_yaml
    monkeypatch.setattr(profiles, "_read_yaml", lambda p, where: reads.append(p) or read(p, where))
    first = profiles.load(str(path))
    assert profiles.load(str(path)) is first and len(reads) == 1
    changed = profiles.load(str(path), overrides={"seed": 4}, notebook=NB3)
    assert profiles.load(str(path), overrides={"seed": 4}, notebook=NB3) is changed and len(reads) == 2
    assert profiles.load(str(path), overrides={"seed": 5}, notebook=NB3).profile.seed == 5 and len(reads) == 3
    with pytest.raises(profiles.ProfileError):  # an override edited into a bad one is validated again
        profiles.load(str(path), overrides={"seed": "five"}, notebook=NB3)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # the file edited
    assert profiles.load(str(path)) is not first and len(reads) == 5
