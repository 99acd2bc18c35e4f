"""The GPU paths without a GPU: the precision policy, per-framework device checks, cuDNN autotuning in a process of
its own, ONNX Runtime's provider options, the preflight, and what a failed row lets go of (each runtime's sync
inside the timed sample: test_gpu_sync.py).

Nothing here runs on a GPU: frameworks are the real CPU builds with their CUDA entry points replaced, or fake modules
in sys.modules. What a GPU would change is said where a test stands in for it.
"""

from __future__ import annotations

import os
import sys
import types

import pytest
import torch

import measuring
from studylib import gpu_check, runtimes
from studylib.bench import grouping, sweep
from studylib.bench.builder import Workloads
from studylib.core.config import Config
from studylib.machine import gpu, limits
from studylib.runtimes.ort_gpu import tensorrt_options
from studylib.workloads.models import Workload


@pytest.fixture(autouse=True)
def restore(monkeypatch):
    """Every flag and variable gpu.apply touches comes back as it was; the device checks are asked afresh."""
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
             torch.get_float32_matmul_precision())
    for var in ("XLA_PYTHON_CLIENT_PREALLOCATE", "TF_FORCE_GPU_ALLOW_GROWTH", "JAX_DEFAULT_MATMUL_PRECISION", "NVIDIA_TF32_OVERRIDE",
                gpu.PRECISION_VAR, gpu.CUDNN_BENCHMARK_VAR):
        monkeypatch.setenv(var, "sentinel")
        monkeypatch.delenv(var)
    monkeypatch.setattr(gpu, "_seen", {})
    yield
    (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
     torch.backends.cudnn.benchmark) = flags[:3]
    torch.set_float32_matmul_precision(flags[3])


# -- the precision policy -------------------------------------------------------------------------------------------

def test_the_policy_is_off_on_a_cpu_whatever_is_asked_and_labelled_so():
    assert gpu.policy(True, "cpu")["tf32"] is False and gpu.policy(True, "cpu")["label"] == "n/a (cpu)"
    assert gpu.policy(True, "cuda")["label"] == "on" and gpu.policy(False, "cuda")["label"] == "off"
    assert gpu.policy(False, "cuda")["settings"]["jax"]["jax_default_matmul_precision"] == "float32"
    assert gpu.policy(True, "cuda")["settings"]["onnxruntime"]["CUDAExecutionProvider.use_tf32"] == 1


def _fake_tf(calls: list):
    tf = types.ModuleType("tensorflow")
    tf.config = types.SimpleNamespace(experimental=types.SimpleNamespace(
        enable_tensor_float_32_execution=lambda on: calls.append(("tf", on)),
        set_memory_growth=lambda device, on: calls.append(("growth", device, on))),
        list_physical_devices=lambda kind: ["GPU:0"])
    return tf


def _fake_jax(calls: list):
    jax = types.ModuleType("jax")
    jax.config = types.SimpleNamespace(update=lambda key, value: calls.append((key, value)))
    return jax


@pytest.mark.parametrize("tf32", [True, False])
def test_apply_sets_every_framework_alike(tf32, monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "tensorflow", _fake_tf(calls))
    monkeypatch.setitem(sys.modules, "jax", _fake_jax(calls))
    env = gpu.apply(gpu.policy(tf32, "cuda"), ("torch", "tensorflow"))
    assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32
    assert torch.get_float32_matmul_precision() == ("high" if tf32 else "highest")
    precision = "tensorfloat32" if tf32 else "float32"
    assert calls == [("tf", tf32), ("growth", "GPU:0", True), ("jax_default_matmul_precision", precision)]
    assert os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert os.environ["JAX_DEFAULT_MATMUL_PRECISION"] == precision  # for a JAX imported later
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and env[gpu.PRECISION_VAR] == str(int(tf32))
    # TensorRT (and cuBLAS) honour NVIDIA_TF32_OVERRIDE=0 only: set where TF32 is off, absent where it is on
    assert os.environ.get("NVIDIA_TF32_OVERRIDE") == (None if tf32 else "0")
    gpu.apply(gpu.policy(not tf32, "cuda"))  # the kernel switched: the override follows the policy
    assert os.environ.get("NVIDIA_TF32_OVERRIDE") == ("0" if tf32 else None)
    assert torch.backends.cudnn.benchmark is False  # not a process started for cudnn.benchmark


def test_apply_never_imports_tensorflow_for_a_process_without_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    real_import = __import__

    def guarded(name, *args, **kwargs):
        assert name != "tensorflow", "gpu.apply imported TensorFlow"
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("builtins.__import__", guarded)
    gpu.apply(gpu.policy(False, "cuda"), ("torch",))
    assert torch.get_float32_matmul_precision() == "highest"


def test_on_a_cpu_the_policy_sets_torchs_defaults_and_nothing_else(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "tensorflow", _fake_tf(calls))
    monkeypatch.setitem(sys.modules, "jax", _fake_jax(calls))
    torch.set_float32_matmul_precision("high")
    env = gpu.apply(gpu.policy(True, "cpu"), ("torch", "tensorflow"))
    assert torch.get_float32_matmul_precision() == "highest" and calls == []
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert "JAX_DEFAULT_MATMUL_PRECISION" not in os.environ


def test_the_replicates_processes_start_with_the_policy_and_no_jax_preallocation():
    from studylib.bench import replicates

    task = types.SimpleNamespace(plan=types.SimpleNamespace(env={"precision": gpu.policy(False, "cuda")}))
    start = replicates._start_vars(task)
    assert start["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and start[gpu.PRECISION_VAR] == "0"
    assert start["NVIDIA_TF32_OVERRIDE"] == "0" and start["JAX_DEFAULT_MATMUL_PRECISION"] == "float32"
    assert start["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"  # every process, whichever Keras backend imports TensorFlow
    assert gpu.CUDNN_BENCHMARK_VAR not in start  # only eager-cudnn-benchmark's own process gets it


def test_rows_and_the_fingerprint_carry_the_policy():
    from studylib.machine import environment

    c = Config("bert-tiny", "eager", "fp32", 1, "cuda", 2, seq_len=8)
    base = {"python": "3.11", "libraries": {"torch": "2.13.0"}}
    on, off = (base | {"precision": gpu.policy(t, "cuda")} for t in (True, False))
    assert environment.fingerprint(on) != environment.fingerprint(off)
    cpu = base | {"precision": gpu.policy(False, "cpu")}
    assert environment.fingerprint(cpu) == environment.fingerprint(base)  # a CPU run's fingerprint is unchanged
    row = sweep.base_row(c, measuring.plan(env=off | {"fingerprint": "f"}), group_key="g", group_id="i")
    assert row["tf32"] == "off"


def test_ort_cuda_options_follow_the_policy_with_a_limited_arena(monkeypatch):
    for flag, want in (("1", "1"), ("0", "0")):
        monkeypatch.setenv(gpu.PRECISION_VAR, flag)
        want = {"use_tf32": want, "arena_extend_strategy": "kSameAsRequested"}
        assert gpu.ort_cuda_options(gpu.current_precision()) == want


# -- device checks --------------------------------------------------------------------------------------------------

def test_each_runtime_names_the_framework_that_sees_no_gpu(monkeypatch):
    reasons = {"torch": None, "tensorflow": "TensorFlow X sees no GPU", "jax": "JAX X sees no GPU",
               "onnxruntime": "ONNX Runtime X has no CUDAExecutionProvider"}
    monkeypatch.setattr(gpu, "SEES", {k: (lambda v=v: v) for k, v in reasons.items()})
    expect = {"eager": None, "compile-default": None, "tf-xla": "TensorFlow", "ort": "ONNX Runtime",
              "ort-tensorrt": "ONNX Runtime", "keras-jax-call": "JAX", "keras-tensorflow": "TensorFlow",
              "keras-torch-jit": None, "keras2-tensorflow": "TensorFlow"}
    for name, framework in expect.items():
        reason = gpu.unavailable("cuda", runtimes.get(name))
        assert (reason is None) if framework is None else reason.startswith(framework), (name, reason)
        assert gpu.unavailable("cpu", runtimes.get(name)) is None
    monkeypatch.setattr(gpu, "_seen", {})
    monkeypatch.setitem(gpu.SEES, "torch", lambda: "PyTorch X sees no CUDA GPU")
    assert gpu.unavailable("cuda", runtimes.get("keras-jax")).startswith("PyTorch")  # the eager reference first


def test_the_checks_say_why_from_each_frameworks_own_answer(monkeypatch):
    ort = types.ModuleType("onnxruntime")
    ort.__version__, ort.get_available_providers = "1.31.1", lambda: ["CPUExecutionProvider"]
    jax = types.ModuleType("jax")
    jax.__version__, jax.devices = "0.10.2", lambda: [types.SimpleNamespace(platform="cpu")]
    tf = types.ModuleType("tensorflow")
    tf.__version__ = "2.21.0"
    tf.config = types.SimpleNamespace(list_physical_devices=lambda kind: [])
    tf.test = types.SimpleNamespace(is_built_with_cuda=lambda: True)
    for name, module in (("onnxruntime", ort), ("jax", jax), ("tensorflow", tf)):
        monkeypatch.setitem(sys.modules, name, module)
    assert "onnxruntime-gpu" in gpu.sees_gpu("onnxruntime") and "CPUExecutionProvider" in gpu.sees_gpu("onnxruntime")
    assert gpu.sees_gpu("jax").startswith("JAX 0.10.2 sees no GPU (devices: cpu)")
    assert gpu.sees_gpu("tensorflow").startswith("TensorFlow 2.21.0 sees no GPU") and "CUDA 12" in gpu.sees_gpu(
        "tensorflow")
    ort.get_available_providers = lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    jax.devices = lambda: [types.SimpleNamespace(platform="gpu")]
    monkeypatch.setattr(gpu, "_seen", {})
    assert gpu.sees_gpu("onnxruntime") is None and gpu.sees_gpu("jax") is None
    if not torch.cuda.is_available():  # this machine's PyTorch: a CPU build, or no GPU
        assert gpu.sees_gpu("torch").startswith("PyTorch ")


def test_a_gpu_older_than_the_torch_build_supports_is_named(monkeypatch):
    cuda = types.SimpleNamespace(is_available=lambda: True, get_device_capability=lambda i: (7, 0),
                                 get_arch_list=lambda: ["sm_75", "sm_80", "sm_90", "sm_120"])
    fake = types.SimpleNamespace(__version__="2.13.0", cuda=cuda, version=types.SimpleNamespace(cuda="13.0"))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert gpu.sees_gpu("torch").startswith("PyTorch 2.13.0 (CUDA 13.0) has no kernels for this GPU (sm_70")
    for capability in ((7, 5), (8, 6), (12, 0)):  # a listed binary of the same major, or a newer minor of it
        monkeypatch.setattr(gpu, "_seen", {})
        cuda.get_device_capability = lambda i, c=capability: c
        assert gpu.sees_gpu("torch") is None, capability
    cuda.get_arch_list = lambda: ["sm_80", "compute_90"]
    for capability, ok in (((7, 5), False), ((9, 0), True), ((10, 0), True)):  # PTX compiles for newer GPUs
        monkeypatch.setattr(gpu, "_seen", {})
        cuda.get_device_capability = lambda i, c=capability: c
        assert (gpu.sees_gpu("torch") is None) is ok, capability


def test_a_keras_row_on_a_gpu_jax_cannot_see_is_a_skipped_row_naming_jax(monkeypatch):
    monkeypatch.setattr(gpu, "_seen", {"torch": None, "jax": "JAX 0.10.2 sees no GPU (devices: cpu)"})
    c = Config("bert-tiny", "keras-jax-call", "fp32", 1, "cuda", 2, seq_len=8, backend="jax")
    env = {"fingerprint": "f", "git_commit": None}
    [row] = sweep.measure_group([c], measuring.plan(env=env), workloads=Workloads(0), group_key="g", group_id="i",
                                replicate=0)
    assert row["status"] == "skipped" and row["error"] == "JAX 0.10.2 sees no GPU (devices: cpu)"


# -- cuDNN autotuning in a process of its own -----------------------------------------------------------------------

def _resnet(variant: str, device: str) -> Config:
    return Config("resnet-tiny", variant, "fp32", 1, device, 2, image_size=32)


def test_cudnn_benchmark_gets_a_process_and_a_group_of_its_own_on_cuda_only():
    configs = [_resnet(v, "cuda") for v in ("eager", "eager-aa", "eager-cudnn-benchmark")]
    groups = grouping.groups_to_measure(configs, configs)
    assert sorted(map(len, groups.values())) == [1, 2]
    [own] = [g for g in groups.values() if len(g) == 1]
    assert own[0].variant == "eager-cudnn-benchmark" and grouping.process_env(own) == {gpu.CUDNN_BENCHMARK_VAR: "1"}
    with pytest.raises(ValueError, match="fixed at process start"):
        grouping.process_env(configs)
    on_cpu = [_resnet(v, "cpu") for v in ("eager", "eager-cudnn-benchmark")]
    assert len(grouping.groups_to_measure(on_cpu, on_cpu)) == 1  # a skipped row beside eager, no extra process


def test_the_flag_is_on_from_process_start_and_the_variant_refuses_a_process_without_it(monkeypatch):
    runtime = runtimes.get("eager-cudnn-benchmark")
    w = Workload("resnet-tiny", "vision", lambda x: x, (torch.zeros(1, 3, 4, 4),), "fp32", "cuda", 1)
    gpu.apply(gpu.policy(False, "cuda"))
    with pytest.raises(runtimes.RuntimeUnavailable, match="from the process's start"):
        runtime.prepare(w)
    monkeypatch.setenv(gpu.CUDNN_BENCHMARK_VAR, "1")  # what its replicate process starts with
    gpu.apply(gpu.policy(False, "cuda"))
    assert torch.backends.cudnn.benchmark is True
    prepared = runtime.prepare(w)
    assert prepared.fn is w.module and prepared.sync is torch.cuda.synchronize  # no flag flipped around the calls


# -- TensorRT's caches and profile -----------------------------------------------------------------------------------

def test_tensorrt_engines_live_beside_their_model_file_one_folder_per_shape(tmp_path):
    w = Workload("roberta-tiny-classifier", "text", None, (), "fp16", "cuda", 2, 37, max_shape=(32, 128))
    model_dir = tmp_path / "onnx" / "k1"
    options = tensorrt_options(w, model_dir, [("input_ids", 2), ("attention_mask", 2)])
    assert options["trt_engine_cache_path"] == str(model_dir / "trt" / "b32s128")  # the profile's largest shape
    assert options["trt_timing_cache_path"] == str(model_dir / "trt")  # shared by the file's shapes
    assert options["trt_engine_cache_enable"] and options["trt_timing_cache_enable"] and options["trt_fp16_enable"]
    assert options["trt_profile_min_shapes"] == "input_ids:1x1,attention_mask:1x1"
    assert options["trt_profile_max_shapes"] == options["trt_profile_opt_shapes"] == "input_ids:32x128,attention_mask:32x128"
    fixed = Workload("bert-tiny", "text", None, (), "fp32", "cuda", 4, 16)
    options = tensorrt_options(fixed, model_dir, [("input_ids", 2)])
    assert options["trt_profile_max_shapes"] == "input_ids:4x16" and not options["trt_fp16_enable"]
    assert options["trt_engine_cache_path"] == str(model_dir / "trt" / "b4s16")


def test_the_tensorrt_folder_follows_the_weights_and_the_shape(tmp_path, monkeypatch):
    """Other weights give another export key, so another folder: an engine of other weights is never loaded."""
    from studylib.runtimes import onnxrt
    from studylib.workloads import models

    monkeypatch.setattr(onnxrt.onnx_export, "export", lambda exporter, workload, path, *names: path.write_bytes(b"onnx"))
    monkeypatch.setattr(onnxrt, "session_inputs", lambda path: [("input_ids", 2)])
    monkeypatch.setattr(onnxrt.onnx_export, "graph_size", lambda path: (1, 4))  # the fake export is no ONNX graph
    seen = []

    def engine_dir(seed: int, batch: int) -> str:
        w = models.torch_workload("bert-tiny", batch_size=batch, seq_len=8, dtype="fp32", device="cpu", seed=seed)
        w.cache_dir = tmp_path
        path, _, key = runtimes.get("ort-tensorrt").model_path(w)
        seen.append(key)
        return tensorrt_options(w, path.parent, [("input_ids", 2)])["trt_engine_cache_path"]

    same = engine_dir(0, 2)
    assert same == str(tmp_path / "onnx" / seen[0] / "trt" / "b2s8") and engine_dir(0, 2) == same
    assert engine_dir(1, 2) != same and seen[2] != seen[0]  # other weights: another key
    assert engine_dir(0, 4) == str(tmp_path / "onnx" / seen[3] / "trt" / "b4s8")  # another shape: its own engine


# -- the preflight --------------------------------------------------------------------------------------------------

def test_gpu_check_without_a_gpu_says_so_in_one_line_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "_nvidia_smi", lambda: None)
    monkeypatch.setattr(gpu, "_seen", {"torch": "PyTorch 2.13.0+cpu is a CPU-only build"})
    assert gpu_check.main(["--profile", "gpu-smoke"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and "no NVIDIA GPU" in out.err


def test_study_start_applies_the_profiles_policy_and_records_it(outputs, monkeypatch):
    """start takes the precision policy from the profile; an override (`tf32`, a profile-wide key) wins, in a profile
    of its own."""
    import json

    from studylib import study
    from studylib.bench import profiles
    from studylib.core import paths

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "USE_TF"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setattr(limits, "cached_peaks", lambda *args, **kwargs: None)
    threads = torch.get_num_threads()
    try:
        off = study.start("01_eager_vs_compiled", "gpu-smoke")
        assert off.env["precision"]["label"] == "off" and os.environ["NVIDIA_TF32_OVERRIDE"] == "0"
        saved = json.loads((paths.results_dir("gpu-smoke") / "env.json").read_text())
        assert saved["precision"] == off.env["precision"]
        on = study.start("01_eager_vs_compiled", "gpu-smoke", overrides={"tf32": True})
        assert on.env["precision"]["label"] == "on" and torch.backends.cuda.matmul.allow_tf32 is True
        assert on.profile.startswith("gpu-smoke+")  # results of their own, and run.json says what made them
        assert profiles.describe_overrides(on.profile) == "gpu-smoke with --set tf32=true"
        assert profiles.load(on.profile).profile.tf32 is True  # the name loads again (studylib report)
        assert on.env["fingerprint"] != off.env["fingerprint"]  # measured again under the other policy
        assert "fp32 matmuls in TF32 (precision policy)" in on.environment_table().data.index
    finally:
        torch.set_num_threads(threads)


# -- a failed configuration lets go of what it held ---------------------------------------------------------------

class _Session:
    """Stands in for an ONNX Runtime session: what a failed configuration must not keep alive."""


def test_failed_configurations_are_rows_and_let_go_of_their_sessions_before_the_group_ends(monkeypatch):
    import weakref

    from studylib.runtimes.pytorch import TorchEager

    held: dict[str, weakref.ref] = {}
    alive_at_release: list[tuple[str, bool, bool]] = []

    class Failing(TorchEager):
        def __init__(self, name: str, when: str):
            self.name, self.when = name, when

        def prepare(self, workload):
            session = _Session()
            held[self.name] = weakref.ref(session)
            calls = [0]

            def call(*xs):
                calls[0] += 1
                if calls[0] > 1:  # the first call (and parity) pass; the rounds fail
                    raise RuntimeError("CUDA error: an illegal memory access was encountered")
                return workload.module(*xs) if session else None

            if self.when == "prepare":
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return runtimes.Prepared(call, workload.inputs, None)

    monkeypatch.setitem(runtimes.REGISTRY, "fails-in-prepare", Failing("fails-in-prepare", "prepare"))
    monkeypatch.setitem(runtimes.REGISTRY, "fails-in-rounds", Failing("fails-in-rounds", "rounds"))
    monkeypatch.setattr(sweep, "release_memory", lambda device: alive_at_release.append(
        tuple((name, ref() is not None) for name, ref in sorted(held.items()))))
    configs = [Config("bert-tiny", v, "fp32", 1, "cpu", 2, seq_len=8)
               for v in ("eager", "fails-in-prepare", "fails-in-rounds")]
    plan = measuring.plan(measuring.FAST | {"max_rounds": 6}, env={"fingerprint": "f", "git_commit": None})
    rows = sweep.measure_group(configs, plan, workloads=Workloads(0), group_key="g", group_id="i", replicate=0)
    assert [r["status"] for r in rows] == ["ok", "oom", "error"] and "illegal memory access" in rows[2]["error"]
    # released after each failure: the prepare's session is gone at once, the rounds' one once the rounds end
    assert alive_at_release == [(("fails-in-prepare", False),), (("fails-in-prepare", False), ("fails-in-rounds", False))]


def test_release_on_a_gpu_collects_and_empties_torchs_cache(monkeypatch):
    import gc

    emptied, collected = [], []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(1))
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    sweep.release_memory("cpu")
    assert emptied == [] and collected == []
    sweep.release_memory("cuda")
    assert emptied == [1] and collected == [1]


def test_the_tensorrt_engine_build_is_a_prepare_step_cached_in_a_later_replicate(tmp_path):
    """Replicate 1 builds the engine when its session is made: a step made then, its seconds recorded beside the
    engine; replicate 2 finds it: a cached step with replicate 1's seconds, which cold_prepare_s adds (the cold
    one-time cost was about half the real one when the build was no step)."""
    from studylib.runtimes.ort_gpu import ENGINE_STEP, EngineBuild

    engines = tmp_path / "trt" / "b4s16"
    engines.mkdir(parents=True)
    first = EngineBuild(engines)
    assert not first.cached
    (engines / "TensorrtExecutionProvider_TRTKernel_graph_1.engine").write_bytes(b"x" * 10)  # the session wrote it
    made = first.after_session(12.5)
    assert (made.step, made.seconds, made.cached, made.bytes) == (ENGINE_STEP, 12.5, False, 10)
    second = EngineBuild(engines)
    loaded = second.after_session(0.3)
    assert (loaded.seconds, loaded.cached, loaded.key) == (12.5, True, "b4s16")
    assert sum(s.seconds for s in [loaded] if s.cached) == 12.5  # what sweep adds to prepare_s for cold_prepare_s


def test_without_an_optimization_profile_the_first_call_builds_the_engine_and_is_its_step(tmp_path):
    """No engine after the session (an image model: TensorRT builds at the first call's shape): the first call's
    seconds are the step's, recorded for the next replicate; the calls after it are not timed by the hook."""
    from studylib.runtimes.ort_gpu import EngineBuild
    from studylib.runtimes.ort_session import OrtCall

    engines = tmp_path / "b8"
    engines.mkdir()
    build = EngineBuild(engines)
    assert build.after_session(0.2) is None

    class Session:
        runs = 0

        def run(self, names, feeds):
            Session.runs += 1
            (engines / "graph.engine").write_bytes(b"e")
            return ["out"]

    steps = []
    call = OrtCall(Session(), ["x"], "cpu")
    call.on_first_call = lambda seconds: steps.extend(s for s in [build.after_first_call(seconds)] if s)
    assert call(1) == "out" and call(1) == "out" and Session.runs == 2
    assert len(steps) == 1 and not steps[0].cached and steps[0].seconds >= 0 and call.on_first_call is None
    assert EngineBuild(engines).cached and EngineBuild(engines).after_session(0.1).seconds == steps[0].seconds
