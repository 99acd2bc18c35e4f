import os

import pytest

# Before anything imports transformers: no TensorFlow import where a test does not need it.
os.environ.setdefault("USE_TF", "0")


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


@pytest.fixture
def fake_clock():
    return FakeClock
