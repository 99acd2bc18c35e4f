"""The seeds' machine profiles and `auto`: each validates and plans; auto picks by GPU memory or cores."""

import pytest
import yaml

from conftest import cli
from studylib.bench import profiles, schemas
from studylib.core import paths
from studylib.machine.environment import Machine

SEED_PROFILES = ["cpu-32", "gpu-t4", "gpu-v100", "gpu-a100", "gpu-3090ti", "gpu-h100"]


_cli = cli  # in-process: these tests check messages and exit statuses, which a new process adds nothing to


@pytest.mark.parametrize("name", SEED_PROFILES)
def test_each_seed_machine_has_a_profile_that_follows_a_seed(name):
    loaded = profiles.load(name)
    p = loaded.profile
    assert p.follows and set(p.follows) <= set(schemas.SEEDS)
    assert p.device == ("cuda" if name.startswith("gpu-") else "cpu")
    assert set(loaded.notebooks()) == {"01_eager_vs_compiled", "02_torchscript_vs_xla", "03_onnx_batching",
                                       "04_sorted_length_batching", "05_keras_backends"} | (
        {"07_text_generation"} if p.device == "cuda" else set())  # study 07: in every GPU profile, cpu-32 not yet
    # the seeds' grids where the profile follows the seed; a profile that does not keeps a part of each, and its
    # section says what it leaves out
    grids = {"02_torchscript_vs_xla": ("000", {"batch_sizes": [1, 2, 4, 8], "seq_lens": [8, 64, 128, 256, 512, 1024]}),
             "03_onnx_batching": ("003", {"batch_sizes": [1, 2, 4, 8, 16, 32, 64]}),
             "04_sorted_length_batching": ("003", {"batch_sizes": [16, 64]})}
    for nb, (seed, grid) in grids.items():
        section = loaded.sections[nb]
        for key, values in grid.items():
            got = getattr(section, key)
            if seed in p.follows:
                assert got == values, (nb, key)
            else:
                assert set(got) <= set(values), (nb, key)
                if got != values:
                    assert section.left_out.strip(), f"{name}: {nb} leaves part of seed {seed}'s {key} out unsaid"
    if "002" in p.follows:  # seed 002 ran its LLMs in bf16
        assert "bf16" in loaded.sections["05_keras_backends"].dtypes
    if p.device == "cuda":
        assert "fp16" in loaded.sections["01_eager_vs_compiled"].dtypes
        assert "ort-tensorrt" in loaded.sections["03_onnx_batching"].variants


def test_a_gpu_profile_plans_on_a_machine_without_one_and_says_so(outputs):
    r = _cli("plan", "--profile", "gpu-a100", outputs=outputs)
    assert r.returncode == 0, r.stderr
    assert "follows: seed 002" in r.stdout and "device cuda, 12 threads" in r.stdout
    assert "estimated total: about" in r.stdout
    from studylib.machine.environment import detect_machine

    if not detect_machine().cuda:
        assert "this machine has no CUDA GPU, so a run here records every configuration as skipped" in r.stdout
    assert not outputs.exists()


@pytest.mark.parametrize("machine, picked", [
    (Machine(True, 79.6, 16, "H100"), "gpu-h100"),
    (Machine(True, 39.4, 12, "A100-SXM4-40GB"), "gpu-a100"),
    (Machine(True, 23.6, 8, "RTX 3090 Ti"), "gpu-3090ti"),
    (Machine(True, 15.8, 8, "V100"), "gpu-t4"),
    (Machine(True, 14.6, 4, "T4"), "gpu-t4"),
    (Machine(False, 0.0, 32), "cpu-32"),
    (Machine(False, 0.0, 2), "cpu"),
])
def test_auto_picks_the_profile_that_fits_the_machine(machine, picked):
    loaded = profiles.load("auto", machine=machine)
    assert loaded.name == "auto" and loaded.picked == picked
    assert loaded.profile.threads == machine.cores  # threads: cores
    target = profiles.load(picked)
    assert loaded.profile.device == target.profile.device
    assert loaded.sections == target.sections
    assert loaded.profile.description.startswith(f"auto: picked {picked} for this machine")
    params = profiles.notebook_parameters(loaded, "01_eager_vs_compiled")
    assert params["profile"] == "auto" and params["threads"] == machine.cores  # results go to outputs/auto/


def test_auto_on_this_machine_plans(outputs):
    r = _cli("plan", "--profile", "auto", outputs=outputs)
    assert r.returncode == 0, r.stderr
    assert "auto: picked " in r.stdout and "estimated total" in r.stdout


AUTO = yaml.safe_load((paths.PARAMS_DIR / "auto.yaml").read_text())
BAD_AUTO = {
    "unknown profile": (lambda d: d["auto"]["cpu"][0].update(use="cpu-9000"),
                        "auto.cpu.0.use: no such profile 'cpu-9000'"),
    "a GPU profile among the CPU rules": (lambda d: d["auto"]["cpu"][0].update(use="gpu-t4"),
                                          "auto.cpu.0.use: profile 'gpu-t4' runs on cuda, not cpu"),
    "no catch-all rule": (lambda d: d["auto"]["cuda"].pop(), "auto.cuda: the last rule must have no minimum"),
    "an auto profile picking itself": (lambda d: d["auto"]["cpu"][-1].update(use="auto"),
                                       "auto.cpu.1.use: 'auto' is itself an auto profile"),
    "unknown rule key": (lambda d: d["auto"]["cpu"][0].update(min_ram=3), "auto.cpu.0.min_ram: unknown key"),
    "zero threads": (lambda d: d["auto"].update(threads=0), "auto.threads"),
}


@pytest.mark.parametrize("case", sorted(BAD_AUTO))
def test_a_bad_auto_profile_exits_2_with_one_line(case, tmp_path, outputs):
    change, expected = BAD_AUTO[case]
    data = yaml.safe_load(yaml.safe_dump(AUTO))
    change(data)
    path = tmp_path / "myauto.yaml"
    path.write_text(yaml.safe_dump(data))
    r = _cli("plan", "--profile", str(path), outputs=outputs)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], lines
    assert not outputs.exists()


def test_an_unknown_seed_and_a_reserved_name_are_one_line_errors(tmp_path, outputs):
    data = yaml.safe_load((paths.PARAMS_DIR / "smoke.yaml").read_text()) | {"follows": ["007"]}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    r = _cli("plan", "--profile", str(bad), outputs=outputs)
    assert r.returncode == 2 and "follows: unknown seed '007'" in r.stderr
    reserved = tmp_path / "summary.yaml"
    reserved.write_text((paths.PARAMS_DIR / "smoke.yaml").read_text())
    r = _cli("run", "--profile", str(reserved), outputs=outputs)
    assert r.returncode == 2 and "the name 'summary' is reserved" in r.stderr
    assert not outputs.exists()


@pytest.mark.parametrize(("name", "limit_min"), [("gpu-a100", 90), ("gpu-a100-tf32", 90), ("gpu-h100", 90),
                                                 ("gpu-smoke", 10)])
def test_the_gpu_profiles_finish_in_bounded_time_by_plans_estimate(name, limit_min):
    """make plan's estimate of the whole profile: an afternoon for a card's profile, minutes for gpu-smoke (it said
    1,114 minutes for gpu-a100 and gpu-h100 alike, one speed for every card)."""
    from studylib.run import estimate_s, planned, select_notebooks

    loaded = profiles.load(name)
    minutes = sum(estimate_s(loaded, nb, planned(loaded, nb)[0]) for nb in select_notebooks(loaded, None)) / 60
    assert 0 < minutes <= limit_min, minutes


def test_each_card_has_its_own_speed_and_a_profile_names_its_card():
    """The speed model is per card (by its memory bandwidth against the A100's guessed speed): an H100 is faster than
    an A100, a T4 slower, and each card's profile names its card (gpu-smoke, any card, none)."""
    from studylib.run import CARD_BANDWIDTH_GBS, card_speed, machine_speed

    assert card_speed("h100") > card_speed("a100") > card_speed("3090ti") > card_speed("t4")
    assert card_speed(None) == card_speed("a100") and machine_speed("cuda", 12, "h100") == card_speed("h100")
    for card in CARD_BANDWIDTH_GBS:
        assert profiles.load(f"gpu-{card}").profile.card == card
    assert profiles.load("gpu-smoke").profile.card is None
