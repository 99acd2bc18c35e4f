import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

# Before anything imports transformers: no TensorFlow import where a test does not need it.
os.environ.setdefault("USE_TF", "0")

import studylib.studies  # noqa: E402, F401 - the tests are the callers: they register the built-in studies

# `make test` runs the suite in two pytest-xdist workers (`-n 2 --dist loadfile --no-loadscope-reorder`): each test
# module is one unit of work, so its module-scoped fixtures are built once and its tests run in file order, as in one
# process, and the units are handed out in the order below. The end-to-end report comes first: one worker spends most
# of the run on it while the other takes the remaining modules, the slow ones first so that both end together; the
# modules of the session's TensorFlow process (tensorflow_probe) follow it, so the other worker takes all three and
# starts that process once.
# Without xdist (plain `pytest`, `make test-full`) only the order changes. (Not `--dist loadgroup`: xdist 3.8 marks a
# group by suffixing the node id, which pytest 9.2's Node.nodeid no longer reads, so its groups never form.)
FIRST = ("test_e2e_smoke", "test_models_xl", "test_seed001", "test_study02", "test_lab", "test_run_schedule",
         "test_warm_compile", "test_export_aoti", "test_study05")


def pytest_collection_modifyitems(config, items):
    rank = {module: i for i, module in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(FIRST)))  # stable: every other test keeps its place


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    """A private outputs/ for the test; the project's own outputs/ is never touched."""
    out = tmp_path / "outputs"
    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(out))
    return out


class FakeClock:
    """A clock that only moves when told: each call of `work` advances it by the next duration."""

    def __init__(self, durations, first=1.0):
        self.now = 0.0
        self.first = first
        self.durations = list(durations)
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self):
        self.now += self.first if self.calls == 0 else self.durations[(self.calls - 1) % len(self.durations)]
        self.calls += 1
        return self.calls


@pytest.fixture(scope="session")
def tensorflow_probe():
    """The checks of tests/tensorflow_probe.py, run in one process with TensorFlow once per session: {check: result}."""
    from tensorflow_probe import run_checks

    return run_checks()


@pytest.fixture
def fake_clock():
    return FakeClock


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def cli(*args, outputs) -> CliResult:
    """`python -m studylib ARGS` called in this process (no new interpreter to import torch into), with its
    exit status and what it printed; STUDYLIB_OUTPUTS points at `outputs` while it runs."""
    from studylib.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    before = os.environ.get("STUDYLIB_OUTPUTS")
    os.environ["STUDYLIB_OUTPUTS"] = str(outputs)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        if before is None:
            os.environ.pop("STUDYLIB_OUTPUTS", None)
        else:
            os.environ["STUDYLIB_OUTPUTS"] = before
    return CliResult(code, out.getvalue(), err.getvalue())


def cli_process(*args, outputs) -> subprocess.CompletedProcess:
    """The real command line in a new process: for what only a process shows (its exit code, its stderr)."""
    env = dict(os.environ, STUDYLIB_OUTPUTS=str(outputs))
    return subprocess.run([sys.executable, "-m", "studylib", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def seed_peaks(outputs, profile: str, threads: int) -> dict:
    """Machine limits in outputs/<profile>/results/env.json that the next study process there reuses instead of
    measuring them (limits.cached_peaks: same environment fingerprint, device, threads and method), for a test that
    starts a real study process but reads nothing of the roofline: it skips their many seconds (a matmul, a triad and
    every library's GEMM in processes of their own). Stand-in rates, as tests/test_roofline.py's; returns them."""
    import json

    from studylib.machine import environment, limits

    peaks = {"method": limits.METHOD, "device": "cpu", "threads": threads, "seconds": 1.0, "measured_at": "now",
             "matmul": {"fp32": {"gflops": 100.0, "ci_low": 95.0, "ci_high": 105.0, "n": 10, "size": 1024,
                                 "kernel": "torch.mm"}},
             "bandwidth": {"gbs": 10.0, "ci_low": 9.0, "ci_high": 11.0, "n": 10, "bytes": 1, "kernel": "triad"}}
    folder = outputs / profile / "results"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.json").write_text(json.dumps({"fingerprint": environment.capture()["fingerprint"], "peaks": peaks}))
    return peaks


def stored_row(config_key: str, status: str = "ok", **values) -> dict:
    """A complete results row as the table stores it (every column of results.COLUMNS), for tests that write
    tables by hand: an 'ok' row has six samples around 1 s; `values` override any column."""
    from studylib.stats.results import COLUMNS

    row = dict.fromkeys(COLUMNS) | {"config_key": config_key, "status": status, "error": ""}
    if status == "ok":
        row |= {"n": 6, "median_s": 1.0, "ci_run_low_s": 0.9, "ci_run_high_s": 1.1, "first_call_s": 1.0,
                "samples_s": [0.9, 0.95, 1.0, 1.0, 1.05, 1.1], "sample_rep": [0] * 6, "sample_round": list(range(6)),
                "replicates": 1, "parity_ok": True}
    return row | values
