"""The measurement plan (issue 31): built once per notebook, frozen, passed whole; nothing rides in the environment."""

import dataclasses
import json
import os
import pickle

import pytest
import torch

import measuring
from studylib import study
from studylib.bench import profiles, replicates, sweep, timing, workers
from studylib.bench.builder import Workloads
from studylib.bench.plan import Plan
from studylib.core import config, paths
from studylib.machine import limits
from studylib.stats import run_shift

PEAKS = {"method": 0, "device": "cpu", "matmul": {"fp32": {"gflops": 100.0}}}


@pytest.fixture
def started(outputs, monkeypatch):
    """study.start on a profile, with the machine's limits stubbed (measuring them takes seconds)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "USE_TF"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setattr(limits, "cached_peaks", lambda *args, **kwargs: PEAKS)
    threads = torch.get_num_threads()

    def start(profile: str, notebook: str = "01_eager_vs_compiled"):
        return study.start(notebook, profile)

    yield start
    torch.set_num_threads(threads)


def test_start_builds_one_frozen_plan_and_the_environment_holds_the_machine_only(started):
    ctx = started("cpu")
    plan = ctx.plan
    assert plan.study == "01_eager_vs_compiled" and plan.profile == "cpu" and plan.peaks == PEAKS == ctx.peaks
    assert plan.run_shift == run_shift.recorded()  # the cpu profile's: recorded
    assert plan.measure == profiles.load("cpu").measure_for("01_eager_vs_compiled")
    assert plan.expectations and plan.frameworks == ("torch",)
    assert "run_shift" not in plan.env and "peaks" not in plan.env
    saved = json.loads((paths.results_dir("cpu") / "env.json").read_text())
    # the record: the environment, the limits measured on it and the harness's overhead (what a re-analysis reads)
    overhead = dataclasses.asdict(ctx.overhead)  # each notebook's own capture time and overhead kept apart too
    assert saved == plan.env | {"peaks": PEAKS, "overhead": overhead, "notebooks": {
        "01_eager_vs_compiled": {"captured_at": plan.env["captured_at"], "overhead": overhead}}}
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 1
    assert started("smoke").plan.run_shift is None  # smoke: unknown


def test_rows_are_stamped_from_the_plan():
    c = config.Config("bert-tiny", "eager", "fp32", 1, "cpu", 2, seq_len=8)
    plan = measuring.plan(env={"fingerprint": "f", "git_commit": "abc", "precision": {"label": "off"}},
                          run_shift=run_shift.of(0.04, 8), study="s", profile="p")
    row = sweep.base_row(c, plan, group_key="g", group_id="i")
    assert (row["study"], row["profile"], row["env_fingerprint"], row["git_commit"], row["tf32"]) == (
        "s", "p", "f", "abc", "off")
    assert (row["run_shift_sigma"], row["run_shift_df"]) == (0.04, 8) and row["settings_hash"] == plan.settings_hash(c)
    assert sweep.base_row(c, plan, group_key="g", group_id="i", commit="def")["git_commit"] == "def"
    unknown = sweep.base_row(c, dataclasses.replace(plan, run_shift=None), group_key="g", group_id="i")
    assert unknown["run_shift_sigma"] is None and unknown["run_shift_df"] is None


def test_the_settings_hash_is_what_measured_alike_means():
    """Measurement settings, the configuration's tolerance (int8 for quantized runtimes) and the seed change it;
    the threads and the machine do not (the fingerprint says the machine)."""
    fp32 = config.Config("bert-tiny", "eager", "fp32", 1, "cpu", 2, seq_len=8)
    int8 = dataclasses.replace(fp32, variant="ort-int8")
    plan = measuring.plan(env={"fingerprint": "f"})
    h = plan.settings_hash(fp32)
    assert h == measuring.plan(env={"fingerprint": "g"}, threads=4).settings_hash(fp32)
    assert h != measuring.plan(measuring.FAST | {"budget_s": 0.1}, env={}).settings_hash(fp32)
    assert h != measuring.plan(env={}, seed=1).settings_hash(fp32)
    assert h != measuring.plan(tolerance=measuring.TOLERANCE | {"fp32": 1e-4}, env={}).settings_hash(fp32)
    assert plan.settings_hash(int8) != h == measuring.plan(
        tolerance=measuring.TOLERANCE | {"int8": 0.5}, env={}).settings_hash(fp32)
    assert plan.rounds(3)["budget_s"] == 3 * measuring.FAST["budget_s"] and "replicates" not in plan.rounds(3)


def _plan_of(loaded: profiles.LoadedProfile, notebook: str) -> Plan:
    prof = loaded.settings_for(notebook)
    return Plan(notebook, "cpu", {"fingerprint": "f"}, prof.measure, dict(prof.parity_tolerance), prof.seed,
                prof.threads)


def _reference_profile(tmp_path) -> profiles.LoadedProfile:
    """The cpu profile as it was at the committed reference's commit."""
    (tmp_path / "cpu.yaml").write_text(measuring.at_reference("params/cpu.yaml"))
    return profiles.load(str(tmp_path / "cpu.yaml"))


@pytest.mark.parametrize("notebook", ["01_eager_vs_compiled", "03_onnx_batching"])
def test_the_committed_reference_counts_as_measured_alike_where_todays_settings_are_its_own(notebook, tmp_path,
                                                                                           monkeypatch):
    """The hash is computed as the reference's rows were: the profile of the reference's commit gives their hashes
    (a resumed or compared run matches them). Today's plan gives the same hash where today's settings for the
    notebook are the reference's, and another where they changed (so a run re-measures them; `make reference`
    then brings the reference to today's settings)."""
    rows = [json.loads(line) for line in (paths.ROOT / "reference/cpu/results" / f"{notebook}.jsonl").open()]
    then = _reference_profile(tmp_path)
    now = profiles.load("cpu")
    then_plan, now_plan = _plan_of(then, notebook), _plan_of(now, notebook)
    method = measuring.reference_method()  # part of the hash: rows of an older timing method are measured again
    same = then_plan.measure == now_plan.measure and then_plan.parity_tolerance == now_plan.parity_tolerance \
        and then_plan.seed == now_plan.seed and method == timing.METHOD
    for row in rows[:20]:
        c = config.Config(**{f: row[f] for f in config.FIELDS})
        assert (now_plan.settings_hash(c) == row["settings_hash"]) == same, c.key
        with monkeypatch.context() as m:
            m.setattr(timing, "METHOD", method)
            assert then_plan.settings_hash(c) == row["settings_hash"], c.key


def test_a_replicate_process_receives_the_plan_whole(tmp_path):
    plan = measuring.plan(env={"fingerprint": "f", "precision": {"label": "off"}}, run_shift=run_shift.of(0.04, 8),
                          peaks=PEAKS, frameworks=("torch", "tensorflow"))
    task = replicates.Task(plan, [], 0, Workloads(0), str(tmp_path))
    again = pickle.loads(pickle.dumps(task))
    assert again.plan == plan and workers.frameworks_of("tensorflow", again.plan, {}) == ("torch", "tensorflow")
    assert not {f.name for f in dataclasses.fields(replicates.Task)} & {"env", "measure_settings", "seed", "threads"}


def test_fp32_rows_under_a_tf32_policy_get_the_tf32_tolerance_and_record_it():
    """The parity tolerance follows the precision policy: gpu-a100-tf32's fp32 rows are held to its tf32 tolerance
    (looser: TF32 keeps fp16's 10-bit mantissa), gpu-a100's to fp32's; bf16, fp16 and int8 are their own either way.
    The row records the tolerance it was held to (parity_tol) and the policy (tf32)."""
    from studylib.bench import plan as plan_module
    from studylib.bench import profiles
    from studylib.core.config import Config
    from studylib.machine.gpu import policy

    def tolerance(profile, dtype="fp32", variant="eager"):
        loaded = profiles.load(profile)
        settings = loaded.settings_for("01_eager_vs_compiled")
        env = {"fingerprint": "f", "precision": policy(settings.tf32, "cuda")}
        p = plan_module.build("01_eager_vs_compiled", profile, settings, env)
        return p.tolerance(Config("bert-base", variant, dtype, 1, "cuda", 12, seq_len=128)), p

    on, on_plan = tolerance("gpu-a100-tf32")
    off, off_plan = tolerance("gpu-a100")
    assert on == on_plan.parity_tolerance["tf32"] > off == off_plan.parity_tolerance["fp32"]
    assert on_plan.row_stamp()["tf32"] == "on" and off_plan.row_stamp()["tf32"] == "off"
    assert tolerance("gpu-a100-tf32", "bf16")[0] == tolerance("gpu-a100", "bf16")[0] == on_plan.parity_tolerance["bf16"]
    assert on_plan.settings_hash(Config("bert-base", "eager", "fp32", 1, "cuda", 12, seq_len=128)) != \
        off_plan.settings_hash(Config("bert-base", "eager", "fp32", 1, "cuda", 12, seq_len=128))
