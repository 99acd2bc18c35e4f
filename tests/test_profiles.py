"""Every kind of bad profile stops with exit 2, one line naming file, key and problem, and no outputs."""

import pytest
import yaml

from conftest import cli, cli_process
from studylib.bench import profiles, schemas
from studylib.core import paths

SMOKE = yaml.safe_load((paths.PARAMS_DIR / "smoke.yaml").read_text())
NB = "01_eager_vs_compiled"


_cli = cli  # in-process: these tests check messages and exit statuses, which a new process adds nothing to


def _mutated(tmp_path, change):
    data = yaml.safe_load(yaml.safe_dump(SMOKE))
    change(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _section(data, nb=NB):
    return data["notebooks"][nb]


NB2, NB3, NB4 = "02_torchscript_vs_xla", "03_onnx_batching", "04_sorted_length_batching"


BAD = {
    "unknown top-level key": (lambda d: d.update(colour="blue"), "colour: unknown key"),
    "unknown section key": (lambda d: _section(d).update(batch_size=[1]),
                            f"notebooks.{NB}.batch_size: unknown key"),
    "wrong type": (lambda d: d.update(threads="two"), "threads: Input should be a valid integer (got 'two')"),
    "wrong type in a list": (lambda d: _section(d).update(batch_sizes=[1, "8"]), f"notebooks.{NB}.batch_sizes.1"),
    "batch size 0": (lambda d: _section(d).update(batch_sizes=[0, 1]),
                     f"notebooks.{NB}.batch_sizes: must be at least 1 (got 0)"),
    "zero threads": (lambda d: d.update(threads=0), "threads: Input should be greater than or equal to 1"),
    "unknown model": (lambda d: _section(d).update(models=["bert-huge"]),
                      f"notebooks.{NB}.models: unknown model 'bert-huge'"),
    "unknown runtime": (lambda d: _section(d).update(variants=["eager", "compile-turbo"]),
                        f"notebooks.{NB}.variants.1: Input should be"),
    "unknown notebook": (lambda d: d["notebooks"].update({"07_quantum": {}}),
                         "notebooks: unknown notebook '07_quantum'"),
    "unknown device": (lambda d: d.update(device="tpu"), "device: Input should be 'cpu' or 'cuda'"),
    "missing key": (lambda d: d.pop("threads"), "threads: required key is missing"),
    "impossible round bounds": (lambda d: d["measure"].update(min_rounds=50, max_rounds=10),
                                "measure: max_rounds (10) is below min_rounds (50)"),
    "too few rounds for a replicate's spread": (lambda d: d["measure"].update(min_rounds=2),
                                                "measure.min_rounds: Input should be greater than or equal to 3"),
    "no replicate": (lambda d: d["measure"].update(replicates=0),
                     "measure.replicates: Input should be greater than or equal to 1"),
    "a number for the run-to-run shift": (lambda d: d.update(run_shift=3.3),
                                          "run_shift: Input should be 'recorded' or 'unknown'"),
    "TF32 on a cpu profile": (lambda d: d.update(tf32=True),
                              "tf32: TF32 is a CUDA GPU format; a cpu profile must leave it false"),
    "a card on a cpu profile": (lambda d: d.update(card="h100"),
                                "card: a GPU card (h100) on a cpu profile: set device: cuda, or leave card out"),
    "an unknown card": (lambda d: d.update(device="cuda", card="b200"), "card: Input should be 't4', 'v100', "),
    "precision policy not a boolean": (lambda d: d.update(device="cuda", tf32="on"),
                                       "tf32: Input should be a valid boolean (got 'on')"),
    "negative budget": (lambda d: d["measure"].update(budget_s=-1), "measure.budget_s: Input should be greater than 0"),
    "sequence longer than the model": (lambda d: _section(d).update(seq_lens=[16, 4096]),
                                       f"notebooks.{NB}: seq_lens: 4096 exceeds bert-tiny's 512 positions"),
    "dtype without a tolerance": (lambda d: (_section(d).update(dtypes=["fp32", "bf16"]),
                                             d.update(parity_tolerance={"fp32": 0.001})),
                                  f"parity_tolerance: has no tolerance for bf16 (used by notebooks.{NB}.dtypes)"),
    "infinite budget": (lambda d: d["measure"].update(budget_s=float("inf")), "measure.budget_s: Input should be"),
    "section given as a list": (lambda d: d["notebooks"].update({NB: [1, 2]}),
                                f"notebooks.{NB}: Input should be a valid dictionary"),
    "no eager reference": (lambda d: _section(d).update(variants=["compile-default"]),
                           f"notebooks.{NB}: variants must include 'eager'"),
    "image model in the framework study": (lambda d: _section(d, NB2).update(models=["resnet-tiny"]),
                                           f"notebooks.{NB2}.models: 'resnet-tiny' is not a text model"),
    "missing corpus file": (lambda d: _section(d, NB4).update(corpus={"source": "data/nope.csv", "column": "text"}),
                            f"notebooks.{NB4}.corpus: data/nope.csv: no such corpus file"),
    "unsupported corpus format": (lambda d: _section(d, NB3).update(corpus={"source": "data/texts.parquet"}),
                                  f"notebooks.{NB3}.corpus: data/texts.parquet: unsupported corpus format"),
    "missing tokenizer file": (lambda d: _section(d, NB3).update(corpus={"tokenizer": "tok/nope.json"}),
                               f"notebooks.{NB3}.corpus: tok/nope.json: no such tokenizer file"),
    "too few texts": (lambda d: _section(d, NB4).update(corpus={"n_texts": 0}),
                      f"notebooks.{NB4}.corpus.n_texts: Input should be greater than or equal to 1"),
    "not a classifier": (lambda d: _section(d, NB3).update(models=["bert-tiny"]),
                         f"notebooks.{NB3}.models: 'bert-tiny' is not a text classifier"),
    "max_length beyond the model": (lambda d: _section(d, NB3).update(max_length=1024),
                                    f"notebooks.{NB3}: max_length: 1024 exceeds roberta-tiny-classifier's 512"),
    "unknown strategy": (lambda d: _section(d, NB4).update(strategies=["unsorted", "random"]),
                         f"notebooks.{NB4}.strategies.1: Input should be"),
    "vocabulary beyond the model": (lambda d: _section(d, NB3).update(corpus={"vocab_size": 20000}),
                                    f"notebooks.{NB3}: corpus.vocab_size: a vocabulary of 20000 tokens does not fit "
                                    f"roberta-tiny-classifier's 8000 embeddings"),
    "no warm-up pass over the data": (lambda d: _section(d, NB4)["measure"].update(warmup_calls=0),
                                      f"notebooks.{NB4}: measure.warmup_calls: passes over a data set need"),
    "skip with an unknown key": (lambda d: _section(d).update(skip=[{"batch": 4}]),
                                 f"notebooks.{NB}.skip.0.batch: unknown key"),
    "skip naming nothing": (lambda d: _section(d).update(skip=[{}]),
                            f"notebooks.{NB}.skip.0: names none of model, dtype, batch_size, seq_len"),
    "skip outside the grid": (lambda d: _section(d).update(skip=[{"batch_size": 8}]),
                              f"notebooks.{NB}: skip[0]: batch_size 8 is not in batch_sizes [1, 4]"),
    "skip of a sequence length outside the grid": (lambda d: _section(d, NB2).update(skip=[{"seq_len": 512}]),
                                                   f"notebooks.{NB2}: skip[0]: seq_len 512 is not in seq_lens"),
    "skip of every shape": (lambda d: _section(d).update(skip=[{"dtype": "fp32"}]),
                            f"notebooks.{NB}: skip leaves out every shape of the grid"),
    "A/A copy of a variant the section does not run": (
        lambda d: _section(d, NB3).update(aa=["eager", "tf-function"]),
        f"notebooks.{NB3}: aa: 'tf-function' is not one of this section's variants"),
    "A/A copy named twice": (lambda d: _section(d).update(aa=["eager", "eager"]),
                             f"notebooks.{NB}: aa: lists a variant twice"),
    "A/A setting not a list": (lambda d: _section(d, NB4).update(aa="ort"), f"notebooks.{NB4}.aa: Input should be"),
    "TF32 on without a tf32 tolerance": (lambda d: d.update(device="cuda", tf32=True,
                                                           parity_tolerance={"fp32": 0.001, "int8": 0.1}),
                                         "parity_tolerance: has no tolerance for tf32 (the profile's fp32 rows run "
                                         "with tf32: true)"),
    "int8 without a tolerance": (lambda d: d.update(parity_tolerance={"fp32": 0.001}),
                                 f"parity_tolerance: has no tolerance for int8 (used by notebooks.{NB3}.variants)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_profile_exits_2_with_one_line_and_touches_nothing(case, tmp_path, outputs):
    change, expected = BAD[case]
    path = _mutated(tmp_path, change)
    for command in ("run", "plan"):
        r = _cli(command, "--profile", str(path), outputs=outputs)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert str(path) in lines[0] and expected in lines[0], lines[0]
        assert "Traceback" not in r.stderr
    assert not outputs.exists()


def test_missing_profile_file(outputs):
    """Through a real process: exit status 2 and exactly one line on stderr."""
    r = cli_process("run", "--profile", "no-such-profile", outputs=outputs)
    assert r.returncode == 2
    assert r.stderr.strip() == ("error: params/no-such-profile.yaml: no such profile file (known profiles: "
                                + ", ".join(paths.known_profiles()) + ")")
    assert not outputs.exists()


def test_invalid_yaml(tmp_path, outputs):
    path = tmp_path / "broken.yaml"
    path.write_text("device: cpu\nthreads: [1, 2\n")
    r = _cli("run", "--profile", str(path), outputs=outputs)
    assert r.returncode == 2 and "not valid YAML: line" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not outputs.exists()


def test_unknown_notebook_argument(outputs):
    r = _cli("run", "--profile", "smoke", "--notebook", "09_nothing", outputs=outputs)
    assert r.returncode == 2 and "--notebook: unknown notebook '09_nothing'" in r.stderr
    assert not outputs.exists()


@pytest.mark.parametrize("name", paths.known_profiles())
def test_every_shipped_profile_validates_and_plans(name, outputs):
    loaded = profiles.load(name)
    assert loaded.notebooks()
    r = _cli("plan", "--profile", name, outputs=outputs)
    assert r.returncode == 0, r.stderr
    assert "estimated total" in r.stdout and "todo" in r.stdout


def test_notebook_parameters_merge_common_and_section():
    p = profiles.notebook_parameters(profiles.load("smoke"), NB)
    assert p["profile"] == "smoke" and p["threads"] == SMOKE["threads"]
    expected = SMOKE["measure"] | _section(SMOKE).get("measure", {})  # a section overrides key by key
    assert p["measure"] == schemas.MeasureSettings(**expected).model_dump()
    assert p["batch_sizes"] == _section(SMOKE)["batch_sizes"]
    assert "left_out" not in p


def test_a_notebooks_overrides_are_checked_like_a_profile():
    with pytest.raises(profiles.ProfileError, match=rf"overrides\['batch_sizes'\]: notebooks.{NB}.batch_sizes: "
                                                    "must be at least 1"):
        profiles.load("smoke", overrides={"batch_sizes": [2, 0]}, notebook=NB)


def test_a_profile_name_cannot_point_outside_params():
    with pytest.raises(profiles.ProfileError, match=r"elsewhere.yaml: no such profile file"):
        profiles.load("../elsewhere")


def test_a_profile_file_name_must_be_a_plain_name(tmp_path, outputs):
    path = tmp_path / "my box.yaml"
    path.write_text((paths.PARAMS_DIR / "smoke.yaml").read_text())
    r = _cli("run", "--profile", str(path), outputs=outputs)
    assert r.returncode == 2 and "the file name is the profile's name" in r.stderr
    assert not outputs.exists()


def test_a_section_can_override_the_measurement_settings(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(SMOKE))
    _section(data)["measure"] = {"budget_s": 9.0, "min_rounds": 11}
    path = tmp_path / "override.yaml"
    path.write_text(yaml.safe_dump(data))
    p = profiles.notebook_parameters(profiles.load(str(path)), NB)
    assert p["measure"]["budget_s"] == 9.0 and p["measure"]["min_rounds"] == 11
    assert p["measure"]["warmup_calls"] == SMOKE["measure"]["warmup_calls"]  # unset keys: the profile's


def test_unusable_tokenizer_file_exits_2(tmp_path, outputs):
    tok = tmp_path / "tok.json"
    tok.write_text("not a tokenizer")
    path = _mutated(tmp_path, lambda d: _section(d, NB3).update(corpus={"tokenizer": str(tok)}))
    r = _cli("plan", "--profile", str(path), outputs=outputs)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"notebooks.{NB3}: corpus: {tok}: not a tokenizers JSON file" in r.stderr
    assert not outputs.exists()


@pytest.mark.parametrize("corpus, expected", [
    ("text,label\nhello world,1\n", "column 'body' not found (columns: text, label)"),
    ("", "empty file, no header row"),
])
def test_user_corpus_without_the_column_exits_2(corpus, expected, tmp_path, outputs):
    data_file = tmp_path / "mine.csv"
    data_file.write_text(corpus)
    path = _mutated(tmp_path, lambda d: _section(d, NB4).update(corpus={"source": str(data_file), "column": "body"}))
    r = _cli("run", "--profile", str(path), outputs=outputs)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"notebooks.{NB4}.corpus: {data_file}: {expected}" in r.stderr
    assert not outputs.exists()


def test_a_profile_can_extend_another_and_override_its_measurement_settings(tmp_path, outputs):
    """`extends: smoke` takes smoke's keys, this file's on top (mappings merged key by key): five processes, the rest
    of smoke's measurement settings and sections as they are. cpu-precise is the cpu profile so, and `plan` of cpu
    names it with its minutes."""
    path = tmp_path / "smoke-precise.yaml"
    path.write_text(yaml.safe_dump({"extends": "smoke", "description": "smoke, five processes",
                                    "measure": {"replicates": 5}}))
    p = profiles.notebook_parameters(profiles.load(str(path)), NB3)
    assert p["profile"] == "smoke-precise" and p["measure"]["replicates"] == 5
    assert p["measure"]["budget_s"] == _section(SMOKE, NB3)["measure"]["budget_s"]  # the section's own, kept
    assert p["measure"]["target_ci_pct"] == SMOKE["measure"]["target_ci_pct"]
    assert p["batch_sizes"] == _section(SMOKE, NB3)["batch_sizes"]
    assert profiles.notebook_parameters(profiles.load(str(path)), NB)["measure"]["replicates"] == 1  # its section's
    precise, cpu = profiles.load("cpu-precise"), profiles.load("cpu")
    assert precise.profile.measure.replicates == 5 and cpu.profile.measure.replicates == 3
    for nb in cpu.notebooks():  # every section as cpu's, sections' own measure settings kept but the processes
        assert precise.measure_for(nb) == cpu.measure_for(nb).model_copy(update={"replicates": 5})
    r = _cli("plan", "--profile", "cpu", outputs=outputs)
    assert r.returncode == 0 and "more precise: PROFILE=cpu-precise (5 processes per group instead of 3)" in r.stdout


@pytest.mark.parametrize("extends, says", [("nothing-here", "extends: no such profile 'nothing-here'"),
                                           ("auto", "extends: 'auto' must be a plain profile")])
def test_a_profile_extending_a_missing_or_auto_profile_exits_2_with_one_line(tmp_path, outputs, extends, says):
    path = tmp_path / "ext.yaml"
    path.write_text(yaml.safe_dump({"extends": extends, "description": "x"}))
    r = _cli("run", "--profile", str(path), outputs=outputs)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not outputs.exists()


def test_the_tf32_variant_is_its_profile_but_for_the_precision_policy():
    """gpu-a100-tf32 stays gpu-a100 in every other setting, so the two differ by the policy alone."""
    def read(name):
        return yaml.safe_load((paths.ROOT / "params" / f"{name}.yaml").read_text())

    base, variant = read("gpu-a100"), read("gpu-a100-tf32")
    assert base.pop("tf32") is False and variant.pop("tf32") is True
    assert variant.pop("description").startswith("gpu-a100 with TF32 on")
    base.pop("description")
    assert variant == base
    assert profiles.load("gpu-a100-tf32").profile.tf32 is True
