"""requirements.lock is the one source of versions; environment.yml mirrors it exactly."""

import re

import yaml

from studylib import paths


def _lock():
    lines = (paths.ROOT / "requirements.lock").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def test_every_lock_line_is_an_exact_pin():
    for line in _lock():
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.+\-]+", line), line


def test_environment_yml_mirrors_the_lock():
    env = yaml.safe_load((paths.ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == _lock()
    assert "python=3.11" in env["dependencies"]


def test_key_versions_are_the_known_good_set():
    pins = dict(line.split("==") for line in _lock())
    assert pins["torch"] == "2.13.0"  # never unpinned: an unpinned torch pulls a multi-GB CUDA build
    assert pins["transformers"] == "4.57.6"
    assert pins["tensorflow"] == "2.21.0" and pins["tf_keras"] == "2.21.0"
    assert pins["papermill"].startswith("2.7") and pins["nbconvert"].startswith("7.17")
