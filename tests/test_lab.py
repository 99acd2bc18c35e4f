"""The third use of the study, tested as used: JupyterLab started the way `make lab` starts it, study 01
opened in headless Chromium driven by Playwright (offline but for the local server on 127.0.0.1), the overrides
in its parameters cell changed by keyboard, Run All from the Run menu, and the new configuration's rows and
figures appear on the page."""

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import expect

import browser
from conftest import seed_peaks
from studylib.bench import profiles
from studylib.core import paths
from studylib.stats.results import ResultsTable

pytestmark = pytest.mark.e2e
NB = "01_eager_vs_compiled"
# The edit a tinkerer makes: the parameters cell's overrides, another batch size and a shorter grid (so the test runs
# in well under a minute); the results go to the overridden profile's own folder, outputs/smoke+<hash>/. The machine's
# limits are seeded there (conftest.seed_peaks): the page's roofline is not what this test reads.
OVERRIDES = {"batch_sizes": [3], "models": ["bert-tiny"],
             "variants": ["eager", "compile-default", "eager-channels-last", "compile-default-channels-last",
                          "export-aoti"]}
EDITS = {"overrides = {}": f"overrides = {json.dumps(OVERRIDES)}"}


# Every cell stays in the page (no virtual scrolling of cells off screen), and no news pop-up.
SETTINGS = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
            "@jupyterlab/apputils-extension/notification": {"fetchNews": "false"}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """`make lab` on a copy of the notebooks, on a free port with a token; yields (url, outputs folder)."""
    if shutil.which("make") is None or browser.find_chromium() is None:
        pytest.skip("needs make and Chromium (make browser installs it)")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(paths.notebook_path(NB), notebooks)
    outputs, token, port = tmp_path / "outputs", secrets.token_hex(16), _free_port()
    for plugin, value in SETTINGS.items():
        (tmp_path / "settings" / plugin).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "settings" / plugin).with_suffix(".jupyterlab-settings").write_text(json.dumps(value))
    venv = Path(sys.prefix)
    args = (f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 "
            f"--IdentityProvider.token={token} --LabApp.expose_app_in_browser=True")
    env = dict(os.environ, STUDYLIB_OUTPUTS=str(outputs), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    log = open(tmp_path / "lab.log", "wb")
    server = subprocess.Popen(["make", "-s", "-o", str(venv / ".studylib-installed"), "lab", f"VENV={venv}",
                               f"LAB_DIR={notebooks}", f"LAB_ARGS={args}"], cwd=paths.ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield f"{base}/lab/tree/{NB}.ipynb?token={token}", outputs
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
        log.close()


def _parameters_source(edits: dict[str, str]) -> str:
    """The committed notebook's parameters cell with `edits` made (each must be there to be made)."""
    nb = nbformat.read(paths.notebook_path(NB), as_version=4)
    source = next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for old, new in edits.items():
        assert old in source, f"not in the parameters cell: {old}"
        source = source.replace(old, new)
    return source


def _wait_for_run_all(page, timeout: float) -> None:
    """Until every code cell shows an execution count ([n]:, not [*]: or [ ]:); fails on error output."""
    prompts = page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt")
    errors = page.locator('.jp-NotebookPanel .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    deadline = time.monotonic() + timeout
    while True:
        assert errors.count() == 0, errors.all_inner_texts()
        shown = [p.strip() for p in prompts.all_inner_texts()]
        if shown and all(re.fullmatch(r"\[\d+\]:", p) for p in shown):
            return
        assert time.monotonic() < deadline, f"run all did not finish within {timeout:.0f} s: {shown}"
        page.wait_for_timeout(2000)


def test_change_a_parameter_in_jupyterlab_and_run_all(lab):
    url, outputs = lab
    loaded = profiles.load("smoke", overrides=OVERRIDES, notebook=NB)  # the folder the notebook measures into
    peaks = seed_peaks(outputs, loaded.name, loaded.settings_for(NB).threads)
    with browser.launch(loopback=True) as page:
        page.goto(url)
        # the notebook is open and its kernel idle (the status bar says so)
        cells = page.locator(".jp-NotebookPanel .jp-CodeCell")
        expect(cells.filter(has_text="overrides = {}")).to_be_visible(timeout=120_000)
        params = cells.nth(next(i for i, text in enumerate(cells.all_inner_texts()) if "overrides = {}" in text))
        expect(page.get_by_role("button", name=re.compile(r"\| Idle$"))).to_be_visible(timeout=120_000)
        # a tinkerer's edit: select the parameters cell's text and put the new grid in its place
        params.locator(".cm-content").click()
        page.keyboard.press("ControlOrMeta+A")
        page.keyboard.insert_text(_parameters_source(EDITS))
        expect(params).to_contain_text('overrides = {"batch_sizes": [3]')
        page.keyboard.press("Escape")  # command mode
        # Run > Run All Cells
        page.locator(".lm-MenuBar-item").get_by_text("Run", exact=True).click()
        page.locator(".lm-Menu-item").get_by_text("Run All Cells", exact=True).click()
        _wait_for_run_all(page, 400)
        outputs_area = page.locator(".jp-NotebookPanel .jp-OutputArea-output")
        answer = outputs_area.locator(".answer").first.inner_text()
        shown_rows = outputs_area.locator("table tr").evaluate_all(
            "rows => rows.map(r => Array.from(r.querySelectorAll('td, th')).map(c => c.innerText.trim()))")
        images = outputs_area.locator("img").evaluate_all(
            "images => images.filter(i => i.complete && i.naturalWidth > 0).length")

    profile = loaded.name
    assert profile.startswith("smoke+") and not (outputs / "smoke").exists()
    assert json.loads((outputs / profile / "results" / "env.json").read_text())["peaks"] == peaks  # not measured again
    rows = ResultsTable(outputs / profile / "results" / f"{NB}.jsonl").rows()
    assert rows and {r["batch_size"] for r in rows} == {3} and {r["model"] for r in rows} == {"bert-tiny"}
    assert {"eager", "compile-default"} <= {r["variant"] for r in rows} and all(r["status"] == "ok" for r in rows)
    # the page shows them: the Answer, the measurements table's rows at batch 3, and the figures
    assert "Pick: " in answer and "compile-default" in answer  # the decision for the edited grid
    measured = [r for r in shown_rows if "bert-tiny" in r and "3" in r]
    assert len(measured) >= len(rows), shown_rows[:12]
    assert images >= 2
