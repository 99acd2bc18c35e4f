"""Same thread count for every framework in a comparison, applied before a framework starts."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from contextlib import contextmanager

# TensorFlow's C++ start-up log (before TF_CPP_MIN_LOG_LEVEL holds): absl's notice, INFO/WARNING, cuInit failing
_TF_START_UP_NOISE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\)|[IW]\d{4} |"
                                r"E\d{4} .*failed call to cuInit")

# the PyTorch profiler's (Kineto's) trace markers, printed at each start and stop
PROFILER_NOISE = re.compile(r"USDT:")


class Captured:
    """`fd` caught in a temporary file while the block runs; `new_lines()` since its last call, `left` at the end."""

    def __init__(self, fd: int):
        self.fd, self.left = fd, []

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved, self.log, self.pos = os.dup(self.fd), tempfile.TemporaryFile(), 0
        os.dup2(self.log.fileno(), self.fd)
        return self

    def new_lines(self) -> list[str]:
        sys.stdout.flush()
        sys.stderr.flush()
        self.log.seek(self.pos)
        text = self.log.read().decode(errors="replace")
        self.pos = self.log.tell()
        return text.splitlines()

    def __exit__(self, *exc):
        self.left = self.new_lines()  # flushed into the file before the descriptor is given back
        os.dup2(self.saved, self.fd)
        os.close(self.saved)
        self.log.close()


@contextmanager
def filtered_stderr(noise: re.Pattern):
    """Run the block with file descriptor 2 captured; pass on every line that `noise` does not match."""
    caught = Captured(2)
    try:
        with caught:
            yield
    finally:
        kept = [line for line in caught.left if line.strip() and not noise.match(line)]
        if kept:
            print("\n".join(kept), file=sys.stderr)


def tensorflow_start_up_log():
    """Keep TensorFlow's start-up log (see _TF_START_UP_NOISE) out of the notebook; pass other lines on."""
    return filtered_stderr(_TF_START_UP_NOISE)


def apply_threads(threads: int, frameworks: tuple[str, ...] = ("torch",)) -> None:
    """The same intra- and inter-op thread count for torch and TensorFlow; OpenMP keeps its own wait policy."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # already fixed for this process (it can be set once); recorded as found in the environment
    if "tensorflow" in frameworks:
        with tensorflow_start_up_log():
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)  # leave GPU memory to PyTorch until TF needs it
        if (tf.config.threading.get_intra_op_parallelism_threads(),
                tf.config.threading.get_inter_op_parallelism_threads()) != (threads, threads):
            try:
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(threads)
            except RuntimeError as e:  # TF's runtime already started in this process with other settings
                raise RuntimeError(f"TensorFlow already runs with other thread settings; restart the kernel ({e})") from e


def threads_in_force(frameworks: tuple[str, ...] = ("torch",)) -> str:
    """The threading this process runs with, as a row's `process` records it."""
    policy = os.environ.get("OMP_WAIT_POLICY")
    parts = [f"OMP_WAIT_POLICY={policy}" if policy else "OMP_WAIT_POLICY unset (OpenMP's default)"]
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        parts.append(f"torch {torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} inter-op")
    if "tensorflow" in frameworks and "tensorflow" in sys.modules:
        tf = sys.modules["tensorflow"].config.threading
        parts.append(f"TensorFlow {tf.get_intra_op_parallelism_threads()} intra-op, "
                     f"{tf.get_inter_op_parallelism_threads()} inter-op")
    return "; ".join(parts)
