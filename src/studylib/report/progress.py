"""Progress: a bar of configurations in a notebook, and the one display of a whole `studylib run` (RunProgress)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO


@contextmanager
def group_progress(total: int, desc: str):
    """Yields `advance(rows)`: moves the bar by the configurations of a combined group."""
    from tqdm import tqdm

    # off under `studylib run`, whose terminal shows RunProgress
    bar = tqdm(total=total, desc=desc, file=sys.stdout, ascii=True, mininterval=2.0, ncols=110, leave=True,
               disable=os.environ.get("STUDYLIB_RUNNER") == "papermill" or total == 0)
    try:
        yield lambda rows: bar.update(len(rows))
    finally:
        bar.close()


@dataclass
class StudyWork:
    """What a run has to measure for one study: configuration-replicates, and plan's estimate for them."""

    total: int  # configurations left to measure × replicates
    estimate_s: float  # plan's model (the study's estimate_s) for those configurations, all replicates
    done: int = 0
    finished: bool = False  # its notebook has run: whatever it left unmeasured will not be measured in this run

    def fraction(self) -> float:
        return 1.0 if self.finished else min(1.0, self.done / self.total) if self.total else 0.0


# plan's estimate as a pseudo-count against this run's rate, so one slow first configuration does not swing it
PRIOR_SHARE = 0.1


def time_left_s(work: dict[str, StudyWork], elapsed_s: float) -> float | None:
    """Seconds left: plan's estimate of the rest scaled by this run's pace; None where plan estimates nothing."""
    total = sum(w.estimate_s for w in work.values())
    if total <= 0:
        return None
    done = sum(w.estimate_s * w.fraction() for w in work.values())
    prior = PRIOR_SHARE * total
    return max(0.0, total - done) * (elapsed_s + prior) / (done + prior)


def _clock_text(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _left_text(work: dict[str, StudyWork], seconds: float | None) -> str:
    if seconds is None:
        return "nothing left to measure"
    if all(w.finished for w in work.values()):
        return "every study has run"
    return "under a minute left" if seconds < 60 else f"about {seconds / 60:.0f} min left"


def _bar_text(fraction: float, width: int = 16) -> str:
    filled = round(fraction * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


_NO_TRIM = 10_000  # tqdm's own trimming is off: _draw cuts the line to the terminal's width itself


class RunProgress:
    """The run's one display: a line redrawn in place on a terminal, else one line per phase; `clock` injectable."""

    def __init__(self, profile: str, work: dict[str, StudyWork], *, stream: TextIO | None = None,
                 terminal: bool | None = None, clock: Callable[[], float] | None = None):
        self.profile, self.work = profile, work
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)()) if terminal is None else terminal
        self.clock = clock or time.monotonic
        self.t0 = self.clock()
        self.study: str | None = None
        self.phase = ""
        self.detail = ""  # within a phase: the notebook's cell
        self._bar = None
        self._lock = threading.Lock()

    def start(self, study: str, phase: str) -> None:
        """Enter a phase of a study ("early pass 1 of 2", "notebook", "render"); plain output prints its line."""
        with self._lock:
            self.study, self.phase, self.detail = study, phase, ""
        if self.terminal:
            self._draw()
        else:
            print(self.line(), file=self.stream, flush=True)

    def update(self, study: str, done: int) -> None:
        """Configuration-replicates of `study` measured so far in this run (never moves back)."""
        w = self.work.get(study)
        if w is not None:
            w.done = max(w.done, min(done, w.total))
        self._draw()

    def cell(self, index: int, count: int) -> None:
        """The notebook phase's cell now running (1-based)."""
        self.detail = f"cell {index} of {count}"
        self._draw()

    def finish(self, study: str) -> None:
        """The study's notebook has run: its share of plan's estimate counts as spent."""
        if study in self.work:
            self.work[study].finished = True
        self._draw()

    def elapsed_s(self) -> float:
        return self.clock() - self.t0

    def line(self, width: int | None = None) -> str:
        """The display's text now; past `width` the bar and longer words go first, the time left stays."""
        names = list(self.work)
        w = self.work.get(self.study)  # type: ignore[arg-type]
        count = ("" if w is None else f"{w.done}/{w.total} configurations × replicates measured" if w.total
                 else "all configurations already measured")
        elapsed = self.elapsed_s()
        when = f"{_clock_text(elapsed)} elapsed, {_left_text(self.work, time_left_s(self.work, elapsed))}"
        which = f" (study {names.index(self.study) + 1} of {len(names)})" if w is not None else ""
        phase = self.phase + (f", {self.detail}" if self.detail else "")
        full = [f"[{self.profile}] {self.study}{which}", phase,
                f"{_bar_text(w.done / w.total)} {count}" if w is not None and w.total else count, when]
        text = " · ".join(p for p in full if p)
        if width is None or len(text) <= width:
            return text
        short = count.replace(" configurations × replicates measured", " measured").replace(
            "all configurations already measured", "all measured")
        which = which.replace(" (study ", " (").replace(" of ", "/")
        return " · ".join(p for p in [f"{self.study}{which}", short, when, phase] if p)[:width]

    def write(self, message: str) -> None:
        """A message that stays (a failure, a notebook's end), printed above the terminal's line."""
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def _draw(self) -> None:
        if not self.terminal or self.study is None:
            return
        with self._lock:
            if self._bar is None:
                from tqdm import tqdm

                # the text is ours (line()); tqdm redraws it in place and keeps write()'s messages above it
                self._bar = tqdm(total=0, bar_format="{desc}", file=self.stream, leave=False, ncols=_NO_TRIM,
                                 nrows=_NO_TRIM)  # one line: tqdm need not ask the screen (a bare pty says 0)
            # cut to the terminal's width: a wrapped line cannot be redrawn in place
            width = shutil.get_terminal_size((160, 24)).columns - 1
            self._bar.set_description_str(self.line(width), refresh=True)

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def watching(display: RunProgress, study: str, phase: str, count: Callable[[], int], every_s: float = 1.0):
    """Run a phase with the display moving: `count()` read and the line redrawn every `every_s` and at the end."""
    display.start(study, phase)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(every_s):
            display.update(study, count())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        display.update(study, count())
