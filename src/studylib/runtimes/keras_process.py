"""Keras in this process: which Keras (3 or 2), the one backend it fixed at import, and its outputs as numpy."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..machine.threads import tensorflow_start_up_log
from .base import RuntimeUnavailable


def keras_module(flavour: str = "keras"):
    """Keras 3 (`keras`, on this process's backend) or Keras 2 (`keras2`: tf-keras, TensorFlow only)."""
    if flavour == "keras2":
        try:
            import tf_keras
        except ImportError:
            raise RuntimeUnavailable("tf-keras (Keras 2) is not installed") from None
        return tf_keras

    try:
        with tensorflow_start_up_log():  # Keras imports TensorFlow where it is installed, whatever the backend
            import keras
    except ImportError:
        raise RuntimeUnavailable("keras 3 is not installed") from None
    return keras


def backend() -> str:
    """The Keras 3 backend this process runs (importing Keras fixes it)."""
    return keras_module().backend.backend()


def check_backend(wanted: str) -> None:
    """Raise RuntimeUnavailable unless this process's Keras runs `wanted` (a process runs one backend)."""
    if wanted == "jax":
        try:
            import jax  # noqa: F401
        except ImportError:
            raise RuntimeUnavailable("jax is not installed (pip install jax; the lock pins it)") from None
    os.environ.setdefault("KERAS_BACKEND", wanted)  # takes effect only if Keras is not imported yet
    found = backend()
    if found != wanted:
        raise RuntimeUnavailable(f"this process's Keras runs the {found} backend; {wanted} needs a process of its own "
                                 f"(KERAS_BACKEND={wanted})")


def to_numpy(output: Any) -> np.ndarray:
    """A Keras output (numpy from predict_on_batch, or a backend tensor) as float64 numpy."""
    if not isinstance(output, np.ndarray):
        output = keras_module().ops.convert_to_numpy(output)
    return np.asarray(output).astype("float64")
