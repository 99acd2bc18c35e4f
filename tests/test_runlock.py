"""One run per profile at a time: a second one stops at once naming the first; a dead holder's lock is taken over."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from studylib.__main__ import BUSY, main
from studylib.core.config import Config
from studylib.machine import runlock

HOLD = textwrap.dedent("""
    import sys, time
    from studylib.machine import runlock
    with runlock.hold(sys.argv[1], "holder under test"):
        print("held", flush=True)
        time.sleep(120)
""")


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    out = tmp_path / "outputs"
    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(out))
    monkeypatch.delenv(runlock.HELD_ENV, raising=False)
    return out


@pytest.fixture
def holder(outputs):
    """Start a process holding a profile's lock; yields a function that starts one per profile."""
    started = []

    def start(profile):
        p = subprocess.Popen([sys.executable, "-c", HOLD, profile], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ))
        assert p.stdout.readline().strip() == "held"
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()
        p.wait()


def test_a_second_run_of_the_profile_exits_at_once_naming_the_first(holder, capsys):
    first = holder("smoke")
    for command in (["run", "--profile", "smoke"], ["report", "--profile", "smoke"]):
        assert main(command) == BUSY
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        assert f"pid {first.pid}" in lines[0] and "holder under test" in lines[0] and "outputs/smoke" in lines[0]


def test_the_lock_of_a_dead_process_is_taken_over(holder, outputs):
    first = holder("smoke")
    first.send_signal(signal.SIGKILL)
    first.wait()
    with runlock.hold("smoke", "second"):
        assert f'"pid": {os.getpid()}' in runlock.lock_path("smoke").read_text()
    assert runlock.lock_path("smoke").read_text() == ""  # released and emptied at the end


def test_a_run_of_another_profile_warns_that_the_cpu_is_shared(holder, capsys):
    first = holder("cpu")
    with runlock.hold("smoke"):
        pass
    err = capsys.readouterr().err
    assert "profile cpu is measuring on this machine too" in err and f"pid {first.pid}" in err


def test_processes_started_by_the_holder_do_not_take_the_lock_again(outputs):
    child = "from studylib.machine import runlock\nwith runlock.hold('smoke'):\n    print('measured')"
    with runlock.hold("smoke"):
        r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=dict(os.environ),
                           timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "measured", r.stderr
        # ... while an unrelated process (without the inherited variable) is refused
        env = {k: v for k, v in os.environ.items() if k != runlock.HELD_ENV}
        r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode != 0 and "Busy" in r.stderr and f"pid {os.getpid()}" in r.stderr
    assert runlock.HELD_ENV not in os.environ


def test_a_notebook_measuring_by_hand_is_refused_while_a_run_holds_the_profile(holder, outputs, monkeypatch):
    from studylib.machine import limits
    from studylib.study import start

    holder("smoke")
    monkeypatch.setattr(limits, "cached_peaks", lambda *args, **kwargs: None)  # measuring them takes seconds
    ctx = start("01_eager_vs_compiled", "smoke")
    with pytest.raises(runlock.Busy):
        ctx.run([Config("bert-tiny", "eager", "fp32", 1, "cpu", 1, seq_len=8)])
    assert not (outputs / "smoke" / "results" / "01_eager_vs_compiled.jsonl").exists()
