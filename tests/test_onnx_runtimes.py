"""ONNX Runtime variants and PyTorch dynamic int8: parity on other shapes, the export cache, threads."""

import dataclasses
import re
import sys

import numpy as np
import pytest
import torch

from studylib.runtimes import REGISTRY, RuntimeUnavailable, onnxrt
from studylib.workloads import models

pytest.importorskip("onnxruntime")

MODEL = "roberta-tiny-classifier"


def workload(cache_dir, seed=0, module=None):
    w = models.torch_workload(MODEL, batch_size=2, seq_len=16, seed=seed, module=module)
    return dataclasses.replace(w, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def module():
    return models.build_torch(MODEL, seed=0)


@pytest.fixture(scope="module")
def batches(module):
    """Other batch sizes and lengths than the (2, 16) the runtimes are prepared on, first row right-padded."""
    out = []
    for batch_size, seq_len, seed in [(3, 7, 1), (1, 40, 2), (64, 24, 3)]:
        ids, mask = models.torch_inputs(MODEL, batch_size=batch_size, seq_len=seq_len, seed=seed)
        ids, mask = ids.clone(), mask.clone()
        half = max(1, seq_len // 2)
        ids[0, half:], mask[0, half:] = module.inner.config.pad_token_id, 0
        out.append((ids, mask))
    return out


@pytest.fixture(scope="module")
def references(module, batches):
    with torch.inference_mode():
        return [module(*b).numpy().astype("float64") for b in batches]


def run_all(name, w, batches):
    """Prepare `name` on `w`, then adapt and run every batch, as a study's pass over a data set does."""
    runtime = REGISTRY[name]
    with runtime.context():
        prepared = runtime.prepare(w)
        adapted = [prepared.adapt(b) for b in batches]
        return prepared, [runtime.to_numpy(prepared.fn(*a)) for a in adapted]


def test_registered():
    assert {"ort", "ort-optimized", "ort-int8", "ort-tensorrt", "torch-int8"} <= set(REGISTRY)
    assert all(REGISTRY[n].framework == "torch" for n in ("ort", "ort-optimized", "ort-int8", "torch-int8"))


@pytest.mark.parametrize("name", ["ort", "ort-optimized"])
def test_fp32_matches_eager_on_other_shapes(name, module, batches, references, tmp_path):
    prepared, outputs = run_all(name, workload(tmp_path, module=module), batches)
    for out, ref in zip(outputs, references):
        assert out.dtype == np.float64 and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, atol=1e-4, rtol=0)
    assert prepared.sync is None
    expected = ["export"] + (["optimize"] if name == "ort-optimized" else [])
    assert [(s.step, s.cached) for s in prepared.steps] == [(step, False) for step in expected]
    assert all(s.seconds > 0 for s in prepared.steps)
    # The workload's own inputs are already converted: call() runs without adapting.
    np.testing.assert_allclose(REGISTRY[name].to_numpy(prepared.call()),
                               module(*workload(None, module=module).inputs).detach().numpy(), atol=1e-4)


def test_optimized_graph_is_fused(module, tmp_path):
    import onnx

    prepared = REGISTRY["ort-optimized"].prepare(workload(tmp_path, module=module))
    key = prepared.steps[-1].key
    assert f"cache key {key}" in prepared.notes
    ops = {n.op_type for n in onnx.load(str(tmp_path / "onnx" / key / onnxrt.MODEL_FILE)).graph.node}
    assert {"Attention", "SkipLayerNormalization"} <= ops


@pytest.mark.parametrize("name", ["ort-int8", "torch-int8"])
def test_int8_close_to_eager_and_same_labels(name, module, batches, references, tmp_path):
    prepared, outputs = run_all(name, workload(tmp_path, module=module), batches)
    diffs = [np.abs(out - ref).max() for out, ref in zip(outputs, references)]
    assert max(diffs) < 2e-2  # int8 noise (~1e-3 seen), not a broken model
    assert max(diffs) > 1e-6  # and really quantized: not the fp32 graph
    agree = np.concatenate([o.argmax(1) == r.argmax(1) for o, r in zip(outputs, references)])
    assert agree.size == 68 and agree.mean() >= 0.9
    if name == "ort-int8":
        import onnx

        ops = {n.op_type for n in onnx.load(str(tmp_path / "onnx" / prepared.steps[-1].key
                                                / onnxrt.MODEL_FILE)).graph.node}
        assert {"QAttention", "MatMulInteger"} <= ops
        assert [s.step for s in prepared.steps] == ["export", "optimize", "quantize"]


def test_cache_reused_in_a_new_workload_and_keyed_by_weights(module, batches, references, tmp_path, monkeypatch):
    first = REGISTRY["ort-int8"].prepare(workload(tmp_path, module=module))
    assert not any(s.cached for s in first.steps)

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(torch.onnx, "export", no_export)
    # A fresh module with the same seed: same weights, so every step comes from the cache.
    again = workload(tmp_path, seed=0)
    assert again.module is not module
    cached = {name: REGISTRY[name].prepare(again) for name in ("ort", "ort-optimized", "ort-int8")}
    for prepared in cached.values():
        assert prepared.steps[0].step == "export" and all(s.cached for s in prepared.steps)
    assert first.steps == [dataclasses.replace(s, cached=False) for s in cached["ort-int8"].steps]
    # ... each cached step reports what it cost when it was made
    plain = cached["ort"]
    np.testing.assert_allclose(REGISTRY["ort"].to_numpy(plain.fn(*plain.adapt(batches[0]))), references[0],
                               atol=1e-4, rtol=0)

    other_seed = workload(tmp_path, seed=1)
    assert onnxrt.export_key(other_seed) != onnxrt.export_key(again)
    with pytest.raises(AssertionError, match="exported again"):
        REGISTRY["ort"].prepare(other_seed)


def test_interrupted_export_leaves_nothing_cached(module, tmp_path, monkeypatch):
    w = workload(tmp_path, module=module)
    real_export = torch.onnx.export

    def interrupted(model, args, f, **kwargs):
        with open(f, "wb") as fh:
            fh.write(b"\x08\x07half a model")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch.onnx, "export", interrupted)
    with pytest.raises(KeyboardInterrupt):
        REGISTRY["ort"].prepare(w)
    root = tmp_path / "onnx"
    assert list(root.iterdir()) == []  # neither a final directory nor the temporary one
    # A process killed mid-export leaves its temporary directory: it never counts as cached.
    stale = root / f".tmp-{onnxrt.export_key(w)}-killed"
    stale.mkdir()
    (stale / onnxrt.MODEL_FILE).write_bytes(b"half")
    monkeypatch.setattr(torch.onnx, "export", real_export)
    prepared = REGISTRY["ort"].prepare(w)
    assert [(s.step, s.cached) for s in prepared.steps] == [("export", False)]


def test_torch_int8_leaves_the_workload_module_alone(module, batches, tmp_path):
    w = workload(tmp_path, module=models.build_torch(MODEL, seed=0))
    linears = [m for m in w.module.modules() if isinstance(m, torch.nn.Linear)]
    prepared, _ = run_all("torch-int8", w, batches[:1])
    assert "Linear layers int8" in prepared.notes
    assert prepared.fn is not w.module
    after = [m for m in w.module.modules() if isinstance(m, torch.nn.Linear)]
    assert len(after) == len(linears) == 14
    assert all(type(m) is torch.nn.Linear and m.weight.dtype == torch.float32 for m in after)
    with torch.inference_mode():
        np.testing.assert_array_equal(w.module(*batches[0]).numpy(), module(*batches[0]).numpy())


def test_ort_threads_follow_torch(module, tmp_path):
    before = torch.get_num_threads()
    threads = 1 if before != 1 else 2
    torch.set_num_threads(threads)
    try:
        prepared = REGISTRY["ort"].prepare(workload(tmp_path, module=module))
    finally:
        torch.set_num_threads(before)
    options = prepared.fn.session.get_session_options()
    assert options.intra_op_num_threads == threads
    assert options.inter_op_num_threads == 1
    assert f"intra_op_threads={threads}" in prepared.notes


def test_unsupported_configurations_are_skipped(module, tmp_path, monkeypatch):
    w = workload(tmp_path, module=module)
    for name in ("ort", "ort-optimized", "ort-int8"):
        with pytest.raises(RuntimeUnavailable, match="fp32 only"):
            REGISTRY[name].prepare(dataclasses.replace(w, dtype="bf16"))
    with pytest.raises(RuntimeUnavailable, match="CPU only"):
        REGISTRY["torch-int8"].prepare(dataclasses.replace(w, device="cuda"))
    import onnxruntime

    with pytest.raises(RuntimeUnavailable, match="TensorRT provider needs a CUDA GPU"):
        REGISTRY["ort-tensorrt"].prepare(w)
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        with pytest.raises(RuntimeUnavailable, match="CUDAExecutionProvider"):
            REGISTRY["ort"].prepare(dataclasses.replace(w, device="cuda"))
    if "TensorrtExecutionProvider" not in onnxruntime.get_available_providers():
        with pytest.raises(RuntimeUnavailable, match="no TensorrtExecutionProvider"):
            REGISTRY["ort-tensorrt"].prepare(dataclasses.replace(w, device="cuda"))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(RuntimeUnavailable, match="onnxruntime is not installed"):
        REGISTRY["ort"].prepare(w)
    assert not (tmp_path / "onnx").exists()  # nothing was exported for any of them


def test_no_cache_dir_uses_a_private_temporary_directory(module):
    w = workload(None, module=module)
    first = REGISTRY["ort"].prepare(w)
    second = REGISTRY["ort"].prepare(w)
    assert first.steps[0].step == "export"
    assert [(s.step, s.cached) for s in second.steps] == [("export", True)]
    assert onnxrt.cache_root(w).is_dir()


# --- the dynamo exporter (ort-dynamo) and torchao's int8 (torchao-int8) beside the deprecated paths -------------------


def test_graph_size_counts_the_main_graphs_nodes_and_the_model_files_bytes(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from studylib.runtimes import onnx_export

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])],
                              "g", [x], [y])
    path = tmp_path / onnxrt.MODEL_FILE
    onnx.save(helper.make_model(graph), str(path))
    (tmp_path / "meta.json").write_text("{}")  # the cache's own file is not the model's
    (tmp_path / "weights.data").write_bytes(b"\0" * 100)  # external data beside the graph is
    assert onnx_export.graph_size(path) == (2, path.stat().st_size + 100)


def test_a_cache_entry_from_before_graph_sizes_gets_them_counted(module, tmp_path):
    import json

    first = REGISTRY["ort"].prepare(workload(tmp_path, module=module))
    [step] = first.steps
    assert step.nodes > 10 and step.bytes > 100_000  # roberta-tiny: a few hundred kB of weights
    meta = tmp_path / "onnx" / step.key / "meta.json"
    old = {k: v for k, v in json.loads(meta.read_text()).items() if k not in ("nodes", "bytes")}
    meta.write_text(json.dumps(old))
    [again] = REGISTRY["ort"].prepare(workload(tmp_path, module=module)).steps
    assert again == dataclasses.replace(step, cached=True)


def test_dynamo_export_matches_eager_on_other_shapes_and_records_its_graph(module, batches, references, tmp_path):
    pytest.importorskip("onnxscript")
    import onnx

    from studylib.runtimes import onnx_export

    prepared, outputs = run_all("ort-dynamo", workload(tmp_path, module=module), batches)
    for out, ref in zip(outputs, references):  # dynamic batch and sequence axes, padding included
        np.testing.assert_allclose(out, ref, atol=1e-4, rtol=0)
    [step] = prepared.steps
    assert (step.step, step.cached) == ("export", False) and step.seconds > 0
    path = tmp_path / "onnx" / step.key / onnxrt.MODEL_FILE
    assert step.nodes == len(onnx.load(str(path)).graph.node) and step.bytes == path.stat().st_size
    assert step.key == onnxrt.export_key(workload(None, module=module), "dynamo") != onnxrt.export_key(
        workload(None, module=module))  # never the TorchScript exporter's file
    assert f"dynamo exporter (torch.onnx.export's default here: {onnx_export.default_exporter()})" in prepared.notes
    assert onnx_export.default_exporter() == "dynamo"  # torch 2.13's signature: dynamo=True
    [cached] = REGISTRY["ort-dynamo"].prepare(workload(tmp_path, module=module)).steps
    assert cached == dataclasses.replace(step, cached=True)  # reused, with the size counted when it was made


def test_without_onnxscript_the_dynamo_export_is_a_skipped_row(module, tmp_path, monkeypatch):
    import importlib.util

    from studylib.bench import sweep

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxscript" else find_spec(name, *a))
    with pytest.raises(RuntimeUnavailable) as info:
        REGISTRY["ort-dynamo"].prepare(workload(tmp_path, module=module))
    assert sweep.classify_failure(info.value) == ("skipped", str(info.value))
    assert "needs onnxscript, which is not installed" in str(info.value)
    assert not (tmp_path / "onnx").exists()
    assert REGISTRY["ort"].prepare(workload(tmp_path, module=module)).steps  # the TorchScript exporter needs none


def test_a_failing_dynamo_export_is_an_error_row_beside_rows_that_ran(tmp_path, monkeypatch):
    import measuring
    from studylib.core.config import Config
    from studylib.runtimes import onnx_export
    from studylib.stats.results import ResultsTable

    real = onnx_export.export

    def export(exporter, *args, **kwargs):
        if exporter == "dynamo":
            raise RuntimeError("Failed to export the model with torch.export. This is step 1/3\nmore lines")
        return real(exporter, *args, **kwargs)

    monkeypatch.setattr(onnx_export, "export", export)
    monkeypatch.setattr(onnx_export, "available", lambda exporter: "")  # as where onnxscript is installed
    configs = [Config("bert-tiny", v, "fp32", 1, "cpu", 1, seq_len=8) for v in ("eager", "ort", "ort-dynamo")]
    rows = measuring.measure(configs, table=ResultsTable(tmp_path / "t.jsonl"),
                             env={"fingerprint": "f", "git_commit": None},
                             measure=measuring.FAST | {"max_rounds": 6}, parts_dir=tmp_path / "parts")
    by = {r["variant"]: r for r in rows}
    assert by["ort-dynamo"]["status"] == "error"
    assert by["ort-dynamo"]["error"] == "RuntimeError: Failed to export the model with torch.export. This is step 1/3"
    assert by["eager"]["status"] == by["ort"]["status"] == "ok"
    assert [s["step"] for s in by["ort"]["prepare_steps"]] == ["export"] and by["ort"]["prepare_steps"][0]["nodes"] > 0


def test_torchao_int8_close_to_eager_same_labels_and_leaves_the_module_alone(batches, references, tmp_path):
    pytest.importorskip("torchao")
    w = workload(tmp_path, module=models.build_torch(MODEL, seed=0))
    prepared, outputs = run_all("torchao-int8", w, batches)
    diffs = [np.abs(out - ref).max() for out, ref in zip(outputs, references)]
    assert 1e-6 < max(diffs) < 2e-2  # really quantized, and int8 noise, not a broken model
    agree = np.concatenate([o.argmax(1) == r.argmax(1) for o, r in zip(outputs, references)])
    assert agree.size == 68 and agree.mean() >= 0.9
    assert "14 Linear layers int8 (torchao " in prepared.notes and prepared.fn is not w.module
    assert all(type(m.weight) is torch.nn.Parameter for m in w.module.modules() if isinstance(m, torch.nn.Linear))
    assert REGISTRY["torchao-int8"].precision == "int8" and REGISTRY["torchao-int8"].family == "int8"


def test_torchao_that_does_not_support_this_torch_is_a_skipped_row_naming_both_versions(module, tmp_path, monkeypatch):
    import types

    from studylib.bench import sweep

    w = workload(tmp_path, module=module)
    monkeypatch.setitem(sys.modules, "torchao", None)  # not installed
    with pytest.raises(RuntimeUnavailable, match=re.escape(f"torchao is not installed (torch {torch.__version__};")):
        REGISTRY["torchao-int8"].prepare(w)
    # an old torchao: its import-time check found this torch incompatible and skipped its kernels
    old = types.ModuleType("torchao")
    old.__version__, old.skip_loading_so_files = "0.13.0", True
    old._skip_reason = (f"Skipping import of cpp extensions due to incompatible torch version {torch.__version__} for "
                        f"torchao version 0.13.0")
    quantization = types.ModuleType("torchao.quantization")
    quantization.quantize_ = lambda *a, **k: pytest.fail("quantized with an incompatible torchao")
    quantization.Int8DynamicActivationInt8WeightConfig = object
    monkeypatch.setitem(sys.modules, "torchao", old)
    monkeypatch.setitem(sys.modules, "torchao.quantization", quantization)
    with pytest.raises(RuntimeUnavailable) as info:
        REGISTRY["torchao-int8"].prepare(w)
    assert str(info.value).startswith(f"torchao 0.13.0 does not support torch {torch.__version__}: Skipping import")
    assert sweep.classify_failure(info.value)[0] == "skipped"
    # one that does not import with this torch at all
    del quantization.Int8DynamicActivationInt8WeightConfig
    says = f"torchao does not import with torch {torch.__version__}: ImportError"
    with pytest.raises(RuntimeUnavailable, match=re.escape(says)):
        REGISTRY["torchao-int8"].prepare(w)
    for bad in (dataclasses.replace(w, device="cuda"), dataclasses.replace(w, dtype="bf16")):
        with pytest.raises(RuntimeUnavailable):
            REGISTRY["torchao-int8"].prepare(bad)
