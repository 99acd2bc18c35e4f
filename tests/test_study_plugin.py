"""A study is a plug-in: a toy study, written here as its own module, notebook and profile, is validated,
planned, measured and summarised by the library without a line of the library knowing it."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import pytest

from studylib.bench import profiles
from studylib.core import study_registry
from studylib.machine import gemm
from studylib.report import summary
from studylib.studies import STUDIES, unregister

TOY = "99_toy_study"

MODULE = '''
"""A toy study: eager PyTorch against TorchScript on one tiny text model."""

from pathlib import Path
from typing import Literal

import pandas as pd

from studylib.stats import speedups
from studylib.bench.schemas import Grid
from studylib.studies import Analysis, Comparison, Study, register
from studylib.studies.base import CLAIM_COLUMNS
from studylib.core.config import AA, REFERENCE, Config

NOTEBOOK = "99_toy_study"


class ToySection(Grid):
    variants: list[Literal["eager", "torchscript"]]


def configs(section, *, device, threads):
    variants = [REFERENCE, AA] + [v for v in section.variants if v not in (REFERENCE, AA)]
    return [Config(m, v, d, b, device, threads, seq_len=s) for m, d, b, s in section.shapes() for v in variants]


def estimate_s(c, section, measure, speed=1.0):
    return 0.5 * measure["replicates"]


def analyse(df, peaks=None, *, vt):
    ok = df[df.status == "ok"].set_index("variant")
    sp = speedups.speedup(ok.loc["eager"], ok.loc["torchscript"])
    claims = pd.DataFrame([{"seed": "toy", "claim": "TorchScript is faster than eager",
                            "this run": f"{sp.ratio:.2f}x", "verdict": "holds" if sp.ci_low > 1 else "not shown"}],
                          columns=CLAIM_COLUMNS)
    return Analysis(tables={"speedup": pd.DataFrame([{"ratio": sp.ratio}])}, findings=[f"{sp.ratio:.2f}x"],
                    claims=claims)


STUDY = register(Study(NOTEBOOK, ToySection, configs, estimate_s, analyse,
                       comparisons=(Comparison("TorchScript over eager (toy)", "torchscript", "eager"),),
                       notebook_file=Path(__file__).with_suffix(".ipynb")))
'''

PROFILE = '''
description: a toy profile for the plug-in test
threads: 1
measure: {warmup_calls: 1, min_rounds: 6, max_rounds: 8, min_time_s: 0.0, target_ci_pct: 50.0, budget_s: 0.05,
          block_s: 0.0, replicates: 1}
notebooks:
  99_toy_study:
    models: [bert-tiny]
    variants: [eager, torchscript]
    dtypes: [fp32]
    batch_sizes: [1, 2]
    seq_lens: [8]
    skip:
      - {batch_size: 2}
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy study's module and notebook in a folder of their own, imported (so registered), and its profile."""
    (tmp_path / "toy_study_module.py").write_text(textwrap.dedent(MODULE))
    notebook = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "profile = 'toy'",
                           "outputs": [], "execution_count": None}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "toy_study_module.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "toy.yaml").write_text(PROFILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(tmp_path / "outputs"))
    # The libraries' GEMMs (a process per library, tests/test_gemm.py) are left out of the toy's limits.
    monkeypatch.setattr(gemm, "run_child", lambda library, threads, budget: {
        key: {"status": "not run", "message": "left out of the toy study's test"} for key in gemm.CHILDREN[library]})
    module = importlib.import_module("toy_study_module")
    yield module, tmp_path / "toy.yaml"
    unregister(TOY)
    sys.modules.pop("toy_study_module", None)


def test_the_toy_study_is_registered_after_the_built_in_ones(toy):
    module, _ = toy
    assert STUDIES[TOY] is module.STUDY and list(STUDIES)[-1] == TOY
    assert STUDIES[TOY].notebook_path.name == "toy_study_module.ipynb"


def test_its_profile_section_is_validated_by_its_own_schema(toy, tmp_path):
    _, path = toy
    loaded = profiles.load(str(path))
    assert type(loaded.sections[TOY]).__name__ == "ToySection"
    assert [(c.variant, c.batch_size) for c in study_registry.grid(loaded, TOY)] == [("eager", 1), ("eager-aa", 1),
                                                                        ("torchscript", 1)]
    bad = tmp_path / "bad.yaml"
    bad.write_text(PROFILE.replace("variants: [eager, torchscript]", "variants: [eager, tf-xla]"))
    with pytest.raises(profiles.ProfileError, match=rf"bad.yaml: notebooks.{TOY}.variants.1: Input should be"):
        profiles.load(str(bad))


def test_it_is_planned_measured_and_summarised(toy, capsys):
    from studylib import study
    from studylib.__main__ import _plan

    _, path = toy
    assert _plan(str(path)) == 0
    out = capsys.readouterr().out
    assert f"{TOY}: 3 configurations" in out and "left out" not in out

    loaded = profiles.load(str(path))
    ctx = study.start(TOY, str(path))  # the profile file toy.yaml: its results under outputs/toy/
    df = ctx.run(study_registry.grid(loaded, TOY))
    assert list(df.status) == ["ok"] * 3 and set(df.variant) == {"eager", "eager-aa", "torchscript"}, list(df.error)

    claims = summary.claims(["toy"])
    assert list(claims[claims.study == "99"].claim) == ["TorchScript is faster than eager"]
    # the registry's seed claims are listed too, none judged: their studies have no results in this profile
    assert set(claims[claims.study != "99"].judgement) == {"not run on this profile", "not tested by this study"}
    headline = summary.headline_speedups(["toy"])
    toy_row = headline[headline.comparison == "TorchScript over eager (toy)"].iloc[0]
    assert toy_row.status == "ok" and toy_row.n == 1


def test_every_variant_a_built_in_study_accepts_is_a_registered_runtime_with_a_known_family():
    import typing

    from studylib import runtimes

    for nb, study in STUDIES.items():
        accepted = typing.get_args(typing.get_args(study.section.model_fields["variants"].annotation)[0])
        assert accepted and set(accepted) <= set(runtimes.REGISTRY), nb
    assert {r.family for r in runtimes.REGISTRY.values()} == {"eager", "compile", "export", "torchscript", "int8",
                                                             "tensorflow", "onnxruntime", "keras"}


def test_a_variant_is_declared_once_by_its_registration():
    """Its family file's registration gives its gloss, its palette and the studies whose sections accept it; whether
    it changes the outputs is its precision's."""
    import typing

    from studylib import runtimes
    from studylib.core.variants import changes_outputs
    from studylib.report import glossary, palette

    declared = runtimes.declared()
    for nb, study in STUDIES.items():
        accepted = typing.get_args(typing.get_args(study.section.model_fields["variants"].annotation)[0])
        assert set(accepted) == {r.name for r in declared if nb[:2] in r.studies}, nb
    assert [r.name for r in declared] == list(glossary.variants()) and all(glossary.variants().values())
    blues = [r.name for r in declared if r.colours == "Blues"]
    assert [palette.colour(n) for n in blues] == palette.sns.color_palette("Blues", len(blues) + 3)[3:]
    assert {n for n in runtimes.REGISTRY if changes_outputs(n)} == {"torch-int8", "torchao-int8", "ort-int8",
                                                                   "torch-int8-aa", "torchao-int8-aa", "ort-int8-aa"}
    assert changes_outputs("ort-int8 · sorted") and changes_outputs("torch-int8 @jax") and not changes_outputs("ort")
