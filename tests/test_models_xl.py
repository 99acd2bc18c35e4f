"""Seed 000's XLNet and XLM in the registry: configs, PyTorch eager, TorchScript, the TensorFlow twin, work per call."""

import numpy as np
import pytest

from studylib import runtimes
from studylib.workloads import models

TINY = ("xlnet-tiny", "xlm-tiny")


def test_registry_kind_family_and_sizes():
    import transformers

    for name, family in [("xlnet-base", "xlnet"), ("xlnet-tiny", "xlnet"), ("xlm-mlm-en-2048", "xlm"),
                         ("xlm-tiny", "xlm")]:
        s = models.spec(name)
        assert (s.kind, s.family) == ("text", family), name
    xlnet = transformers.XLNetConfig(**models.spec("xlnet-base").config)
    assert (xlnet.d_model, xlnet.n_layer, xlnet.n_head, xlnet.d_inner, xlnet.vocab_size) == (768, 12, 12, 3072, 32000)
    assert xlnet.use_mems_eval is False and xlnet.mem_len is None  # no recurrence memory: one output tensor
    xlm = transformers.XLMConfig(**models.spec("xlm-mlm-en-2048").config)
    assert (xlm.emb_dim, xlm.n_layers, xlm.n_heads, xlm.vocab_size) == (2048, 12, 16, 30145)
    assert models.spec("xlm-mlm-en-2048").max_positions == 512 and models.spec("xlm-tiny").vocab_size == 1000
    assert models.spec("xlnet-base").max_positions is None  # relative positions: no table to run out of
    assert models.spec("xlnet-base").vocab_size == 32000


def test_unknown_model_is_still_one_line():
    with pytest.raises(models.UnknownModel, match="unknown model 'xlnet-huge'") as e:
        models.spec("xlnet-huge")
    assert "\n" not in str(e.value) and "xlnet-base" in str(e.value)


@pytest.mark.parametrize("name", TINY)
def test_eager_and_torchscript_agree(name):
    w = models.torch_workload(name, batch_size=2, seq_len=8, seed=3)
    eager, script = runtimes.get("eager"), runtimes.get("torchscript")
    with eager.context():
        ref = eager.to_numpy(eager.prepare(w).call())
        again = eager.to_numpy(models.torch_workload(name, batch_size=2, seq_len=8, seed=3).module(*w.inputs))
        traced = script.to_numpy(script.prepare(w).call())
    assert ref.shape == (2, 8, 64)  # the last hidden state alone (no XLNet mems)
    assert np.abs(ref).max() > 0.1
    np.testing.assert_array_equal(ref, again)  # fixed seed: the same weights
    np.testing.assert_allclose(traced, ref, atol=1e-4)


def test_sequence_limits():
    with pytest.raises(ValueError, match="exceeds xlm-tiny's 512 positions"):
        models.torch_workload("xlm-tiny", batch_size=1, seq_len=513)
    w = models.torch_workload("xlnet-tiny", batch_size=1, seq_len=600)  # XLNet has no position table
    assert w.tokens_per_call == 600


@pytest.mark.parametrize("name", TINY)
def test_work_per_call_is_counted(name):
    from studylib.workloads import work as counting

    def real():
        w = models.torch_workload(name, batch_size=1, seq_len=16)
        return w.module, w.inputs

    work = counting.work_per_call(name, dtype="fp32", batch_size=1, seq_len=16, real=real)
    # at least the two layers' projections and feed-forward: 2 FLOPs per multiply-add, 16 tokens
    hidden, inner = 64, 128
    assert work.flops >= 2 * 16 * 2 * (4 * hidden * hidden + 2 * hidden * inner)
    assert work.weight_bytes > 4 * 1000 * 64 and work.activation_bytes > 0


def test_tensorflow_twin_holds_the_same_weights(tensorflow_probe):
    result = tensorflow_probe["xl"]  # run in the session's one process with TensorFlow (tests/tensorflow_probe.py)
    for name in TINY:
        shape, eager_diff, graph_diff, scale, compilations = result[name]
        assert shape == [2, 12, 64], name
        assert scale > 0.1, name
        assert eager_diff < 1e-4 * max(1, scale), name  # within the fp32 parity tolerance (1e-3) with room
        assert graph_diff < 1e-4 * max(1, scale), name
        assert compilations == 1, name


def test_plan_costs_follow_the_models_work():
    """The plan's per-call cost factor against the work counted on the meta device (XLNet) or from XLM's config."""
    from studylib.core.config import Config
    from studylib.studies import torchscript_vs_xla as s02
    from studylib.workloads import work as counting

    bert, xlnet = (counting.count(counting._meta_model(n, "fp32"),
                                  models.torch_inputs(n, batch_size=1, seq_len=128, device="meta"))
                   for n in ("bert-base", "xlnet-base"))
    assert models.spec("xlnet-base").cost == pytest.approx(xlnet.flops / bert.flops, rel=0.1)
    # XLM-2048 per token: 12 layers of four 2048² projections and a 2048 × 8192 feed-forward, 2 FLOPs a multiply-add
    xlm_flops = 2 * 12 * (4 * 2048**2 + 2 * 2048 * 8192) * 128
    assert models.spec("xlm-mlm-en-2048").cost == pytest.approx(xlm_flops / bert.flops, rel=0.1)
    measure = dict(replicates=1, warmup_calls=1, min_rounds=6, block_s=0.0, min_time_s=0.0)
    est = {m: s02.estimate_s(Config(m, "eager", "fp32", 1, "cpu", 2, seq_len=128), None, measure)
           for m in ("bert-base", "xlnet-base", "xlm-mlm-en-2048")}
    assert est["bert-base"] < est["xlnet-base"] < 2 * est["bert-base"] and est["xlm-mlm-en-2048"] > 5 * est["bert-base"]




def test_study02_group_runs_every_variant_on_xlnet_and_xlm(tensorflow_probe):
    """One study-02 group per tiny model, as a run measures it: every variant prepared, parity-checked against eager
    PyTorch (TensorFlow on the twin's copied weights) and its work counted (XLM's on the real model); in the session's
    one process with TensorFlow (tests/tensorflow_probe.py)."""
    result = tensorflow_probe["xl_group"]
    for model in TINY:
        for variant, status, error, parity_ok, flops in result[model]:
            assert (status, parity_ok) == ("ok", True), (model, variant, error)
            assert flops and flops > 0, (model, variant)
