"""The variant and profile names pages use, in plain words: the page's "Words used on these pages" lists them, so an
internal name ('compile-max-autotune', 'ort-int8', 'smoke-fast') is glossed wherever it appears. Every runtime the
registry knows has its line here (tests/test_verdicts.py keeps it so)."""

from __future__ import annotations

import html

VARIANTS = {
    "eager": "PyTorch, run op by op as written (the baseline of most comparisons)",
    "compile-default": "torch.compile, default mode (Inductor)",
    "compile-reduce-overhead": "torch.compile, mode reduce-overhead (CUDA graphs on a GPU; the same code as default on a CPU)",
    "compile-max-autotune": "torch.compile, mode max-autotune (benchmarks kernel choices while compiling)",
    "eager-channels-last": "eager PyTorch with the model and image inputs in channels_last (NHWC) layout",
    "compile-default-channels-last": "torch.compile (default) of the channels_last model",
    "eager-cudnn-benchmark": "eager PyTorch with cudnn.benchmark on, in a process of its own (GPU only)",
    "torchscript": "torch.jit.trace, then frozen",
    "torchscript-optimized": "TorchScript with optimize_for_inference",
    "export-aoti": "torch.export, then AOTInductor (aoti_compile_and_package): the model compiled ahead of time into a "
                   "package, loaded and called; TorchScript's successor for deployment (cold compile per configuration)",
    "torch-int8": "PyTorch dynamic int8 quantization of every Linear (changes the outputs)",
    "torchao-int8": "torchao's int8 dynamic quantization of every Linear (quantize_ with "
                    "Int8DynamicActivationInt8WeightConfig), the successor of torch-int8's deprecated torch.ao "
                    "(changes the outputs)",
    "static": "text generation on transformers' StaticCache (allocated once at its full length) instead of the "
              "default dynamic cache",
    "static-compile": "StaticCache with the model's forward compiled by torch.compile (transformers 4.57 compiles it "
                      "by itself only on CUDA: on a CPU the study compiles it)",
    "tf-eager": "TensorFlow, the same weights, run eagerly",
    "tf-function": "TensorFlow, the same weights, traced into a tf.function graph",
    "tf-xla": "tf.function compiled by XLA (jit_compile=True)",
    "ort": "ONNX Runtime on the exported model",
    "ort-optimized": "ONNX Runtime on the model after its transformer graph optimizer",
    "ort-int8": "ONNX Runtime on the dynamically int8-quantized model (changes the outputs)",
    "ort-tensorrt": "ONNX Runtime with its TensorRT provider (GPU only)",
    "ort-dynamo": "ONNX Runtime on the model exported by torch.onnx.export(dynamo=True), the path torch 2.13 takes by "
                  "default (the other ort variants start from the deprecated TorchScript exporter, dynamo=False)",
    "keras-torch": "Keras 3 on the PyTorch backend, predict_on_batch",
    "keras-torch-jit": "Keras 3 on the PyTorch backend, jit_compile (torch.compile)",
    "keras-torch-call": "Keras 3 on the PyTorch backend, a direct model call",
    "keras-tensorflow": "Keras 3 on the TensorFlow backend, predict_on_batch (a tf.function graph)",
    "keras-tensorflow-jit": "Keras 3 on the TensorFlow backend, jit_compile (XLA)",
    "keras-tensorflow-call": "Keras 3 on the TensorFlow backend, a direct (eager) model call",
    "keras-jax": "Keras 3 on the JAX backend, predict_on_batch",
    "keras-jax-jit": "Keras 3 on the JAX backend, jit_compile (XLA)",
    "keras-jax-call": "Keras 3 on the JAX backend, a direct model call",
    "keras2-tensorflow": "Keras 2 (tf-keras) predict_on_batch",
    # study 02: a variant in one process with the other framework, where every other runs in a process of its own
    "eager-shared": "eager PyTorch in one process with TensorFlow (OpenMP's own wait policy)",
    "eager-shared-passive": "eager PyTorch in one process with TensorFlow, under OMP_WAIT_POLICY=PASSIVE (idle "
                            "OpenMP threads sleep), a setting often given a process that holds both frameworks",
    "tf-function-shared": "tf.function in one process with PyTorch (OpenMP's own wait policy)",
    "tf-function-shared-passive": "tf.function in one process with PyTorch, under OMP_WAIT_POLICY=PASSIVE",
}
WORDS = {
    "<variant>-aa": "an A/A copy: the variant prepared again on its own copy of the model, timed like any variant",
    "sorted, bucketed, pad-to-max, unsorted": "how study 04 batches texts: by length, within buckets of batches, "
                                               "every text padded to the maximum, or in the given order",
    "smoke, smoke-fast": "tiny profiles that check the pipeline in minutes; their numbers are not real models'",
    "(jax process)": "measured in the process of that Keras backend (backends run in processes of their own)",
}


def html_list() -> str:
    """The glossary's entries for a page's "Words used on these pages"."""
    items = {**{f"<code>{html.escape(k)}</code>": v for k, v in VARIANTS.items()},
             **{html.escape(k): v for k, v in WORDS.items()}}
    return "".join(f"<dt>{k}</dt><dd>{html.escape(v)}.</dd>" for k, v in items.items())
