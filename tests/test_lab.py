"""The third use of the study, tested as used: JupyterLab started the way `make lab` starts it, study 01
opened in headless Chromium (offline but for the local server), a parameter changed in its parameters
cell, all cells run, and the new configuration's rows and figures appear on the page."""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from studylib import browser, paths
from studylib.results import ResultsTable

pytestmark = pytest.mark.e2e
NB = "01_eager_vs_compiled"
# The edit a tinkerer makes: another batch size, and a shorter grid so the test runs in about a minute.
EDITS = {'batch_sizes = [1, 4]': 'batch_sizes = [3]', 'models = ["bert-tiny", "resnet-tiny"]': 'models = ["bert-tiny"]',
         '"compile-default", "compile-reduce-overhead", "compile-max-autotune", ': '"compile-default", '}


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


def _js(tools, expression: str, timeout: float = 30):
    """Evaluate (and await) an expression in the page; its JSON value."""
    got = tools.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                     timeout=timeout)
    if "exceptionDetails" in got:
        raise AssertionError(f"page script failed: {got['exceptionDetails']}")
    return got["result"].get("value")


def _wait_for(tools, expression: str, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = _js(tools, expression)
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# The notebook's panel (found by its path: a headless page has no focus, so there is no "current" widget).
NOTEBOOK = (f"(window.jupyterapp && Array.from(jupyterapp.shell.widgets('main'))"
            f".find(w => w.context && w.context.path === '{NB}.ipynb'))")
READY = f"""(() => {{ const w = {NOTEBOOK};
  return !!(w && w.content && w.content.widgets && w.content.widgets.length > 0 && w.sessionContext &&
            w.sessionContext.session && w.sessionContext.session.kernel &&
            w.sessionContext.session.kernel.connectionStatus === 'connected'); }})()"""
EDIT = """(() => { const w = %s;
  const cell = w.content.widgets.find(c => (c.model.getMetadata('tags') || []).includes('parameters'));
  let source = cell.model.sharedModel.getSource();
  for (const [from, to] of Object.entries(%s)) {
    if (!source.includes(from)) return 'not in the parameters cell: ' + from;
    source = source.replace(from, to);
  }
  cell.model.sharedModel.setSource(source);
  return 'ok'; })()"""
PROGRESS = """(() => { const w = %s;
  const code = w.content.widgets.filter(c => c.model.type === 'code');
  const errors = w.node.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
  return JSON.stringify({done: code.filter(c => c.model.executionCount !== null).length, of: code.length,
    errors: Array.from(errors).map(e => e.innerText.slice(0, 300)),
    idle: w.sessionContext.session.kernel.status === 'idle'}); })()"""
PAGE = """(() => { const w = %s;
  const rows = Array.from(w.node.querySelectorAll('.jp-OutputArea-output table tr'))
    .map(r => Array.from(r.querySelectorAll('td, th')).map(c => c.innerText.trim()));
  const images = Array.from(w.node.querySelectorAll('.jp-OutputArea-output img'));
  const answer = w.node.querySelector('.jp-OutputArea-output .answer');
  return JSON.stringify({rows, images: images.filter(i => i.complete && i.naturalWidth > 0).length,
                         answer: answer ? answer.innerText : ''}); })()"""


def test_change_a_parameter_in_jupyterlab_and_run_all(lab):
    url, outputs = lab
    with browser.launch(loopback=True) as tools:
        tools.send("Page.enable")
        tools.send("Page.navigate", {"url": url})
        _wait_for(tools, READY, 120, "JupyterLab to open the notebook with a connected kernel")
        assert _js(tools, EDIT % (NOTEBOOK, json.dumps(EDITS))) == "ok"
        _js(tools, f"jupyterapp.shell.activateById({NOTEBOOK}.id), void jupyterapp.commands.execute('notebook:run-all-cells')")
        deadline = time.monotonic() + 400
        while True:
            progress = json.loads(_js(tools, PROGRESS % NOTEBOOK))
            assert not progress["errors"], progress["errors"]
            if progress["done"] == progress["of"] and progress["idle"]:
                break
            assert time.monotonic() < deadline, f"run all did not finish: {progress}"
            time.sleep(2)
        page = json.loads(_js(tools, PAGE % NOTEBOOK))

    rows = ResultsTable(outputs / "smoke" / "results" / f"{NB}.jsonl").rows()
    assert rows and {r["batch_size"] for r in rows} == {3} and {r["model"] for r in rows} == {"bert-tiny"}
    assert {"eager", "compile-default"} <= {r["variant"] for r in rows} and all(r["status"] == "ok" for r in rows)
    # the page shows them: the Answer, the measurements table's rows at batch 3, and the figures
    assert "torch.compile (default) over eager" in page["answer"]
    measured = [r for r in page["rows"] if "bert-tiny" in r and "3" in r]
    assert len(measured) >= len(rows), page["rows"][:12]
    assert page["images"] >= 2
