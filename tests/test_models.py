"""Models from configs: no download, fixed seed, expected shapes; runtimes keep preparation apart."""

import numpy as np
import pytest

from studylib import runtimes
from studylib.workloads import models


def test_same_seed_same_weights_and_outputs():
    a = models.torch_workload("bert-tiny", batch_size=2, seq_len=8, seed=3)
    b = models.torch_workload("bert-tiny", batch_size=2, seq_len=8, seed=3)
    eager = runtimes.get("eager")
    with eager.context():
        out_a, out_b = (eager.to_numpy(w.module(*w.inputs)) for w in (a, b))
    assert out_a.shape == (2, 8, 64)
    np.testing.assert_array_equal(out_a, out_b)


def test_vision_workload_shapes_and_dtype():
    import torch

    w = models.torch_workload("resnet-tiny", batch_size=3, image_size=32, dtype="bf16")
    assert w.inputs[0].shape == (3, 3, 32, 32) and w.inputs[0].dtype == torch.bfloat16
    with torch.inference_mode():
        assert w.module(*w.inputs).shape == (3, 10)
    assert w.tokens_per_call is None and w.seq_len is None


def test_base_sizes_mirror_their_checkpoints():
    import transformers

    bert = transformers.BertConfig(**models.spec("bert-base").config)
    assert (bert.hidden_size, bert.num_hidden_layers, bert.vocab_size) == (768, 12, 30522)
    resnet = transformers.ResNetConfig(**models.spec("resnet-50").config)
    assert resnet.depths == [3, 4, 6, 3] and resnet.layer_type == "bottleneck"


def test_unknown_model():
    with pytest.raises(models.UnknownModel, match="unknown model 'gpt-9'"):
        models.spec("gpt-9")


def test_compiled_runtime_matches_eager_and_compiles_in_its_first_call():
    w = models.torch_workload("bert-tiny", batch_size=1, seq_len=8)
    eager, compiled = runtimes.get("eager"), runtimes.get("compile-default")
    with eager.context():
        ref = eager.to_numpy(eager.prepare(w).call())
        prepared = compiled.prepare(w)  # cheap: torch.compile is lazy
        out = compiled.to_numpy(prepared.call())
    assert prepared.sync is None  # nothing to wait for on CPU
    np.testing.assert_allclose(out, ref, atol=1e-4)
