"""`make gpu-check`'s verdict without a GPU: fake probe results, a fake ONNX Runtime session that falls back to the
CPU, a fake /proc/self/maps. The probes themselves need a GPU (make gpu-proof runs them there)."""

from __future__ import annotations

import sys
import types

import pytest

from studylib.gpu_check import Probe, loaded_cuda_libraries, ort_session, verdict


def _ok(path, major=12, err=None):
    return Probe(path, "ok", "ran", "cuda:0", True, "x", major, tf32_error=err)


ALL_OK = [_ok("torch eager", err=2e-6), _ok("torch.compile (Triton)"), _ok("TensorFlow + XLA", err=3e-6),
          _ok("JAX", err=2e-6), _ok("ONNX Runtime CUDA", major=None)]
TRT_MISSING = Probe("ONNX Runtime TensorRT", "skip", "TensorRT 10 is not installed", expected=True)


def test_every_path_on_the_gpu_and_an_expected_skip_is_exit_0():
    assert verdict(ALL_OK + [TRT_MISSING], tf32=False) == (0, [])


@pytest.mark.parametrize(("change", "problem"), [
    (lambda p: p[:2] + [Probe("TensorFlow + XLA", "fail", "TensorFlow 2.21.0 sees no GPU")] + p[3:],
     "TensorFlow + XLA: TensorFlow 2.21.0 sees no GPU"),
    (lambda p: p + [Probe("JAX", "skip", "JAX is not installed")], "JAX: skipped: JAX is not installed"),
    (lambda p: p[:4] + [Probe("ONNX Runtime CUDA", "ok", "ran", "cpu", False)], "its output lies on cpu, not the GPU"),
    (lambda p: p[:3] + [_ok("JAX", major=13)] + p[4:], "more than one CUDA major: torch eager 12"),
    (lambda p: [_ok("torch eager", err=4e-4)] + p[1:], "is TF32's, and the policy is tf32 off"),
])
def test_anything_wrong_is_exit_1_with_a_line_saying_what(change, problem):
    code, problems = verdict(change(list(ALL_OK)) + [TRT_MISSING], tf32=False)
    assert code == 1 and any(problem in p for p in problems), problems


def test_tf32_errors_are_expected_where_the_policy_is_on():
    assert verdict([_ok("torch eager", err=4e-4)], tf32=True) == (0, [])


def test_two_copies_of_a_cuda_library_in_one_process_are_a_clash():
    maps = "\n".join([
        "7f00-7f01 r-xp 0 08:01 1 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
        "7f02-7f03 r-xp 0 08:01 2 /venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
        "7f04-7f05 r-xp 0 08:01 3 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_ops.so.9",
        "7f06-7f07 r-xp 0 08:01 4 [heap]"])
    one = loaded_cuda_libraries(maps)
    assert one == {"libcudnn": {"/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"},
                   "libcudart": {"/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"}}
    assert verdict(ALL_OK, tf32=False, libraries=one) == (0, [])
    two = loaded_cuda_libraries(maps + "\n7f08-7f09 r-xp 0 08:01 5 /venv/site-packages/tensorflow/libcudnn.so.8")
    code, problems = verdict(ALL_OK, tf32=False, libraries=two)
    assert code == 1 and problems[0].startswith("2 copies of libcudnn in one process")


class _FakeSession:
    """An InferenceSession whose build lists a provider whose libraries did not load: it runs on the ones after it."""

    def __init__(self, model, providers):
        self.providers = [p if isinstance(p, str) else p[0] for p in providers][1:]

    def get_providers(self):
        return self.providers


@pytest.fixture
def fake_ort(monkeypatch):
    ort = types.ModuleType("onnxruntime")
    ort.__version__ = "1.26.0"
    ort.get_available_providers = lambda: ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setitem(sys.modules, "onnxruntime", ort)
    monkeypatch.setattr("studylib.gpu_check._tiny_onnx", lambda: b"model")
    return ort


def _trt(state, detail="TensorRT 10 (libnvinfer.so.10, ...)"):
    from studylib.machine.gpu import TensorRT

    return lambda major: TensorRT(state, f"{detail} [major {major}]")


def test_the_session_not_the_build_says_which_provider_ran(fake_ort):
    """The build lists CUDA, the session falls back to the CPU: a failure, not 'sees the GPU'."""
    cuda = ort_session("CUDAExecutionProvider", make=_FakeSession)
    assert cuda.status == "fail" and "the session runs on CPUExecutionProvider" in cuda.detail
    trt = ort_session("TensorrtExecutionProvider", make=_FakeSession, tensorrt=_trt("not installed"))
    assert trt.status == "skip" and trt.expected and "[major 10]" in trt.detail  # optional: an expected skip
    trt = ort_session("TensorrtExecutionProvider", make=_FakeSession, tensorrt=_trt("loaded"))
    assert trt.status == "fail" and "loaded, yet the provider did not start" in trt.detail
    fake_ort.get_available_providers = lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert ort_session("TensorrtExecutionProvider").expected  # not in the build at all: expected, named
    code, problems = verdict(ALL_OK + [cuda, trt], tf32=False)
    assert code == 1 and problems == [f"ONNX Runtime CUDA: {cuda.detail}", f"ONNX Runtime TensorRT: {trt.detail}"]


def test_the_probe_model_loads_in_the_installed_onnxruntime():
    """The ONNX Runtime probes' model is read by this machine's onnxruntime on its CPU provider: onnx 1.23 writes IR
    14 by default, which onnxruntime refuses ("max supported IR version: 13"), and both probes failed on a good GPU
    install. Its IR version is what onnxruntime says it reads."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from studylib import gpu_check

    model = onnx.load_from_string(gpu_check._tiny_onnx())
    assert model.ir_version == min(onnx.IR_VERSION, gpu_check.max_ir_version())
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.ones((4, 8), dtype="float32")})
    assert np.allclose(y, 4.0)


@pytest.mark.parametrize(("refuses_above", "message"), [
    (13, "Unsupported model IR version: {ir}, max supported IR version: 13"),  # onnxruntime's words: read
    (9, "some other wording, without the maximum"),  # no number: found by trying onnx's versions downwards
])
def test_the_maximum_ir_version_is_asked_of_onnxruntime(refuses_above, message):
    from studylib import gpu_check

    tried = []

    def make(model, providers):
        import onnx

        ir = onnx.load_from_string(model).ir_version
        tried.append(ir)
        assert providers == ["CPUExecutionProvider"]
        if ir > refuses_above:
            raise RuntimeError(message.format(ir=ir))

    assert gpu_check.max_ir_version(make) == refuses_above
    assert tried[0] == 1000 and (len(tried) == 1) == ("max supported" in message)
    import onnx

    stamped = onnx.load_from_string(gpu_check._tiny_onnx(max_ir=refuses_above)).ir_version
    assert stamped == min(refuses_above, onnx.IR_VERSION)


def test_gpu_check_says_whether_export_aoti_finds_a_cuda_toolkit(tmp_path):
    """No toolkit: an expected skip naming it (the export-aoti rows will be skipped rows); a toolkit: ok, and not a
    "not on the GPU" problem (nothing runs: it is looked for)."""
    from studylib import gpu_check

    missing = gpu_check.aoti_toolkit(lambda: None)
    assert (missing.status, missing.expected) == ("skip", True)
    assert "finds none here" in missing.detail and "install the CUDA 12 toolkit" in missing.detail
    assert missing.detail.endswith("its rows are skipped")
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda_runtime_api.h").write_text("")
    found = gpu_check.aoti_toolkit(lambda: str(tmp_path))
    assert found.status == "ok" and found.detail == f"CUDA toolkit at {tmp_path}"
    assert verdict(ALL_OK + [TRT_MISSING, missing], tf32=False) == (0, [])
    assert verdict(ALL_OK + [TRT_MISSING, found], tf32=False) == (0, [])


def test_tensorrt_not_installed_is_told_from_not_loadable(fake_ort):
    """gpu-check: TensorRT missing is an expected skip (ort-tensorrt rows are skipped rows), TensorRT there but
    refused by the loader (a wrong major, a missing dependency) a failure that says which file and why."""
    missing = ort_session("TensorrtExecutionProvider", make=_FakeSession, tensorrt=_trt("not installed"))
    broken = ort_session("TensorrtExecutionProvider", make=_FakeSession,
                         tensorrt=_trt("not loadable", "libnvinfer.so.10 did not load: libcudart.so.13: cannot open"))
    assert (missing.status, missing.expected) == ("skip", True)
    assert (broken.status, broken.expected) == ("fail", False)
    assert broken.detail.startswith("installed but not loadable: libnvinfer.so.10 did not load: libcudart.so.13")
    assert verdict(ALL_OK + [missing], tf32=False)[0] == 0 and verdict(ALL_OK + [broken], tf32=False)[0] == 1
    fake_ort.__version__ = "1.99.0"  # a release whose TensorRT major is not known: said, never guessed
    unknown = ort_session("TensorrtExecutionProvider", make=_FakeSession, tensorrt=_trt("loaded"))
    assert unknown.status == "fail" and "which TensorRT major onnxruntime 1.99.0 links is not known" in unknown.detail


def _libs(folder, names=("libnvinfer", "libnvinfer_plugin", "libnvonnxparser"), major=10):
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"{name}.so.{major}").write_bytes(b"")
    return folder


def test_tensorrt_libraries_are_loaded_globally_from_the_pip_package(tmp_path):
    """preload_tensorrt loads TensorRT 10's three libraries from tensorrt_libs before a session asks for them; no
    package or no files is "not installed", a file the loader refuses or one missing is "not loadable"."""
    from studylib.machine.gpu import preload_tensorrt

    loaded = []
    got = preload_tensorrt(10, _libs(tmp_path / "ok"), load=loaded.append)
    assert got.state == "loaded" and [p.rsplit("/", 1)[1] for p in loaded] == [
        "libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"] and got.files == tuple(loaded)
    assert preload_tensorrt(10, tmp_path / "nothing", load=loaded.append).state == "not installed"
    assert preload_tensorrt(10, _libs(tmp_path / "v11", major=11), load=loaded.append).state == "not installed"
    partial = preload_tensorrt(10, _libs(tmp_path / "part", names=("libnvinfer",)), load=loaded.append)
    assert partial.state == "not loadable" and "lacks libnvinfer_plugin.so.10, libnvonnxparser.so.10" in partial.detail

    def refuse(path):
        raise OSError("libcudart.so.13: cannot open shared object file: No such file or directory")

    refused = preload_tensorrt(10, _libs(tmp_path / "ok"), load=refuse)
    assert refused.state == "not loadable" and "libnvinfer.so.10 in" in refused.detail and "libcudart.so.13" in refused.detail

