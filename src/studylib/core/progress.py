"""A progress bar of configurations in the notebook (JupyterLab); under `studylib run` the terminal has its own."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


@contextmanager
def group_progress(total: int, desc: str):
    """Yields `advance(rows)`: moves the bar by the configurations of a combined group."""
    from tqdm import tqdm

    # Under `studylib run` the terminal shows the bar (run.py watches the results), so the executed notebook
    # is not filled with progress lines; in JupyterLab the bar shows in the cell.
    bar = tqdm(total=total, desc=desc, file=sys.stdout, ascii=True, mininterval=2.0, ncols=110, leave=True,
               disable=os.environ.get("STUDYLIB_RUNNER") == "papermill" or total == 0)
    try:
        yield lambda rows: bar.update(len(rows))
    finally:
        bar.close()
