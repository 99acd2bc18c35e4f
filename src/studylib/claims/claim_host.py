"""The host caveat of a CPU verdict "X over eager PyTorch" where X runs on another library (TensorFlow, ONNX
Runtime, JAX): both libraries' fp32 GEMM rates on this host (peaks["gemm"], machine/gemm.py) where they differ by
more than gemm.GAP_RATIO, so the verdict carries this host's GEMM path."""

from __future__ import annotations

import inspect

from .. import runtimes
from ..core import wording
from ..machine import gemm
from ..workloads import models as model_registry
from .claim_registry import Claim, ClaimError, evaluator

EAGER = "eager"  # eager PyTorch, the baseline the caveat is about
VARIANT_ARGS = ("candidate", "baseline", "variant", "variants", "over")  # an evaluator's arguments naming variants
NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "onnxruntime": "ONNX Runtime", "jax": "JAX"}


def gemm_library(variant: str) -> str:
    """The library whose GEMM a variant's matrix products run on a CPU (the record's runner key): TensorFlow's,
    ONNX Runtime's (MLAS), a Keras backend's, else PyTorch's."""
    runtime = runtimes.REGISTRY.get(variant)
    family = getattr(runtime, "family", "eager")
    if family in ("tensorflow", "onnxruntime"):
        return family
    if family == "keras":
        return getattr(runtime, "backend", "tensorflow")
    return "torch"


def _arguments(claim: Claim) -> dict:
    """The claim's evaluator arguments with the evaluator's defaults filled in (worst_gain's `over` is eager)."""
    try:
        signature = inspect.signature(evaluator(claim))
    except ClaimError:
        return dict(claim.args)
    defaults = {k: p.default for k, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}
    return defaults | claim.args


def _single_ops(claim: Claim) -> bool:
    """Whether the claim is about single operations only (micro-ops such as argmax: no GEMM in them)."""
    kinds = set()
    for name in claim.conditions.models:
        try:
            kinds.add(model_registry.spec(name).kind)
        except model_registry.UnknownModel:
            kinds.add("unknown")
    return kinds == {"op"}


def compared(claim: Claim) -> list[str]:
    """The libraries other than PyTorch a claim compares with eager PyTorch (from its evaluator's arguments and
    their defaults); [] where it names no eager PyTorch, compares PyTorch with itself or is about single ops."""
    if not claim.evaluator or not claim.study or _single_ops(claim):
        return []
    args, named = _arguments(claim), []
    for key in VARIANT_ARGS:
        value = args.get(key)
        named += [value] if isinstance(value, str) else list(value or ())
    if args.get("baseline") is None and args.get("over") is None:
        named.append(EAGER)  # no baseline named: the study's default, eager PyTorch (worst_gain, over_batch1, …)
    if EAGER not in named:
        return []
    return list(dict.fromkeys(lib for lib in map(gemm_library, named) if lib != "torch"))


def host_caveat(claim: Claim, device: str, peaks: dict | None) -> str | None:
    """One sentence with this host's fp32 GEMM figures for each library the claim compares with eager PyTorch,
    where they differ from PyTorch's by more than GAP_RATIO; None on a GPU, without the record, or where the
    GEMMs are close."""
    if device != "cpu" or not peaks:
        return None
    parts = []
    for lib in compared(claim):
        ratio = gemm.gemm_ratio(peaks, lib, "torch", "fp32")
        if ratio is None or 1 / gemm.GAP_RATIO <= ratio <= gemm.GAP_RATIO:
            continue
        parts.append((NAMES.get(lib, lib), gemm.rate_span(gemm.study_rates(peaks, lib, "fp32")),
                      gemm.rate_span(gemm.study_rates(peaks, "torch", "fp32")), ratio))
    return wording.macro("claims/host.md.j2", "caveat", parts, gemm.GAP_RATIO) if parts else None
