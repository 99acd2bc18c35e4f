"""Check the rendered HTML report in a real (headless) browser, offline.

`check_report` opens ``outputs/index.html`` in headless Chromium, follows every link of the index,
and for each page records broken images, error outputs (stderr and tracebacks as nbconvert renders
them), requests that left the machine and, for the index, dead links; it saves a full-page screenshot
of every page. The browser runs with its network cut off (every host name resolves to nothing and
every request goes to a proxy that does not exist), so a page that needs the network shows up as a
problem instead of silently fetching something.

The browser is driven over the Chrome DevTools Protocol with a small client (`DevTools`) built on
``websocket-client``; no other dependency. ``python -m studylib.browser [outputs_dir]`` runs the
check from the command line.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
"""Executables looked up on PATH, in this order, when STUDYLIB_CHROMIUM is not set."""

NETWORK_OFF_FLAGS = (
    # Every host name resolves to "not found": no DNS look-up, no connection by name.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    # Every request, addresses included, goes to a proxy on the discard port, which refuses it...
    "--proxy-server=127.0.0.1:9",
    # ...and loopback too (Chromium bypasses the proxy for localhost unless told not to).
    "--proxy-bypass-list=<-loopback>",
)
"""Flags that cut the browser off the network (see tests/test_browser.py for the proof)."""

BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--remote-debugging-port=0",
    "--window-size=1280,900",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
    *NETWORK_OFF_FLAGS,
)
"""Chromium's command line, less --user-data-dir (a fresh temporary directory per launch)."""

MAX_SCREENSHOT_HEIGHT = 20000
"""Screenshots stop at this many CSS pixels; longer pages are cut."""

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
"""Requests to these schemes stay on the machine; any other request is external."""


class BrowserUnavailable(RuntimeError):
    """No Chromium to run: install it (the Makefile does) or set STUDYLIB_CHROMIUM."""


class BrowserError(RuntimeError):
    """The browser did not start, did not answer, or answered a DevTools command with an error."""


def find_chromium() -> str | None:
    """The Chromium executable: STUDYLIB_CHROMIUM if set, else the first of CHROMIUM_NAMES on PATH."""
    explicit = os.environ.get("STUDYLIB_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


# --------------------------------------------------------------------------------------------------
# DevTools protocol


class DevTools:
    """A DevTools protocol session over one websocket: commands, and the events that arrive between."""

    def __init__(self, ws_url: str, timeout: float = 30.0) -> None:
        # No Origin header (Chromium refuses foreign origins) and never a proxy for the loopback.
        self.ws = websocket.create_connection(
            ws_url, timeout=timeout, suppress_origin=True, http_no_proxy=["127.0.0.1", "localhost"]
        )
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def close(self) -> None:
        """Close the websocket (the browser stays up)."""
        self.ws.close()

    def _receive(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None once `deadline` (time.monotonic) has passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        self.ws.settimeout(remaining)
        try:
            raw = self.ws.recv()
        except websocket.WebSocketTimeoutException:
            return None
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Run one command and return its result; events that arrive meanwhile are kept in `events`."""
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            message = self._receive(deadline)
            if message is None:
                raise BrowserError(f"no answer to {method} within {timeout or self.timeout:.0f} s")
            if message.get("id") == message_id:
                if "error" in message:
                    raise BrowserError(f"{method} failed: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, timeout: float) -> dict[str, Any] | None:
        """The params of the first (kept or coming) event named `method`, or None after `timeout` s."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event["method"] == method:
                    return event.get("params", {})
            seen = len(self.events)
            message = self._receive(deadline)
            if message is None:
                return None
            if "method" in message:
                self.events.append(message)

    def drain(self, quiet: float = 0.2) -> None:
        """Keep the events that arrive until none has for `quiet` seconds."""
        while (message := self._receive(time.monotonic() + quiet)) is not None:
            if "method" in message:
                self.events.append(message)


def _http_json(url: str, method: str = "GET") -> Any:
    """JSON from the browser's DevTools HTTP endpoint, never through a proxy from the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, method=method), timeout=10) as response:
        return json.load(response)


def _loopback_allowed(flags: Sequence[str]) -> list[str]:
    """The offline flags, but 127.0.0.1 resolves and bypasses the dead proxy (Chromium's default for loopback)."""
    out = []
    for flag in flags:
        if flag.startswith("--proxy-bypass-list"):
            continue
        out.append(flag + ", EXCLUDE 127.0.0.1" if flag.startswith("--host-resolver-rules") else flag)
    return out


@contextmanager
def launch(chromium: str | None = None, startup_timeout: float = 30.0, *,
           loopback: bool = False) -> Iterator[DevTools]:
    """Start headless Chromium, offline, on a fresh profile; yield a DevTools session on one page.

    `loopback`: let the page reach servers on this machine (127.0.0.1, e.g. JupyterLab); everything
    else stays cut off. The browser is killed and its temporary profile removed on exit, whatever happened.
    """
    executable = chromium or find_chromium()
    if executable is None:
        raise BrowserUnavailable(
            "no Chromium found (looked for STUDYLIB_CHROMIUM, then " + ", ".join(CHROMIUM_NAMES) + " on PATH); "
            "install it (Debian: apt-get install chromium) or set STUDYLIB_CHROMIUM"
        )
    workdir = Path(tempfile.mkdtemp(prefix="studylib-chromium-"))
    profile = workdir / "profile"
    log_path = workdir / "chromium.log"
    process: subprocess.Popen[bytes] | None = None
    session: DevTools | None = None
    try:
        with open(log_path, "wb") as log:
            try:
                process = subprocess.Popen(
                    [executable, *(_loopback_allowed(BROWSER_FLAGS) if loopback else BROWSER_FLAGS),
                     f"--user-data-dir={profile}", "about:blank"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: the renderers go with it
                )
            except OSError as exc:
                raise BrowserUnavailable(f"cannot run {executable}: {exc}") from exc
        port = _devtools_port(profile / "DevToolsActivePort", process, log_path, startup_timeout)
        session = DevTools(_page_websocket_url(port))
        yield session
    finally:
        if session is not None:
            try:
                session.send("Browser.close", timeout=5)
            except Exception:  # noqa: BLE001 - the browser may already be gone; it is killed below
                pass
            session.close()
        if process is not None:
            _stop(process)
        shutil.rmtree(workdir, ignore_errors=True)


def _devtools_port(port_file: Path, process: subprocess.Popen[bytes], log_path: Path, timeout: float) -> int:
    """The DevTools port Chromium writes to <user-data-dir>/DevToolsActivePort once it listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_file.exists():
            lines = port_file.read_text().splitlines()
            if lines and lines[0].strip().isdigit():
                return int(lines[0])
        if process.poll() is not None:
            break
        time.sleep(0.05)
    log_tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
    state = f"exited with {process.returncode}" if process.poll() is not None else f"silent for {timeout:.0f} s"
    raise BrowserError(f"Chromium did not start ({state}); its output:\n{log_tail}")


def _page_websocket_url(port: int) -> str:
    """The websocket of a page target: the first open page, or a new one."""
    base = f"http://127.0.0.1:{port}"
    for target in _http_json(f"{base}/json/list"):
        if target.get("type") == "page" and target.get("webSocketDebuggerUrl"):
            return target["webSocketDebuggerUrl"]
    return _http_json(f"{base}/json/new?about:blank", method="PUT")["webSocketDebuggerUrl"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the browser and the processes it started (its own process group)."""
    if process.poll() is None:
        try:
            process.wait(timeout=3)  # after Browser.close it usually exits by itself
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)  # the group led by the browser (start_new_session)
        except (ProcessLookupError, PermissionError):
            break
        try:
            process.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue


# --------------------------------------------------------------------------------------------------
# Page checks

# Runs in the page once it has loaded: waits for every image to decode (or fail), then reports.
_INSPECT_JS = r"""
(async () => {
  const images = Array.from(document.images);
  for (const img of images) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const settle = Promise.allSettled(images.map(img => img.decode()));
  await Promise.race([settle, new Promise(done => setTimeout(done, %(image_timeout_ms)d))]);
  const describe = img => {
    const src = img.getAttribute('src') || '';
    const shown = src.length > 80 ? src.slice(0, 60) + '... (' + src.length + ' characters)' : src;
    return (shown || '(no src)') + (img.complete ? '' : ' (still loading)');
  };
  const broken = images.filter(img => !img.complete || img.naturalWidth === 0).map(describe);
  const blank = [];  /* figures of one colour throughout: nothing was drawn */
  for (const img of images.filter(img => img.complete && img.naturalWidth > 0)) {
    try {
      const canvas = document.createElement('canvas');
      canvas.width = Math.min(img.naturalWidth, 128); canvas.height = Math.min(img.naturalHeight, 128);
      const context = canvas.getContext('2d');
      context.drawImage(img, 0, 0, canvas.width, canvas.height);
      const px = context.getImageData(0, 0, canvas.width, canvas.height).data;
      let uniform = true;
      for (let i = 4; i < px.length && uniform; i += 4) {
        uniform = px[i] === px[0] && px[i + 1] === px[1] && px[i + 2] === px[2] && px[i + 3] === px[3];
      }
      if (uniform) blank.push(describe(img));
    } catch (e) { /* an image from a file taints the canvas: it cannot be read, so it is not judged */ }
  }
  const errorSelector = [
    '[data-mime-type="application/vnd.jupyter.stderr"]',  /* nbconvert: stderr streams and tracebacks */
    '#papermill-error-cell',  /* papermill: where a failing notebook stopped */
  ].join(', ');
  const errors = Array.from(document.querySelectorAll(errorSelector)).map(
    el => (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 300));
  const links = Array.from(document.querySelectorAll('a[href]')).map(
    a => ({raw: a.getAttribute('href'), resolved: a.href}));
  return JSON.stringify({title: document.title, n_images: images.length, broken, blank, errors, links});
})()
"""


@dataclass
class PageCheck:
    """What the browser saw on one page of the report."""

    url: str
    path: Path
    title: str = ""
    n_images: int = 0
    broken_images: list[str] = field(default_factory=list)
    empty_figures: list[str] = field(default_factory=list)
    """Images of a single colour throughout (a figure with nothing drawn)."""
    error_outputs: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    dead_links: list[str] = field(default_factory=list)
    """Local links whose target file is missing (on every page), or, on the index, whose page did not load."""
    external_links: list[str] = field(default_factory=list)
    """Index only: http(s) links; the report must read offline."""
    links: list[str] = field(default_factory=list)
    """Index only: the local pages it links, as written in the href (fragment removed)."""
    load_error: str | None = None
    screenshot: Path | None = None

    def problems(self) -> list[str]:
        """One readable line per problem; empty when the page is fine."""
        out: list[str] = []
        if self.load_error:
            out.append(f"did not load: {self.load_error}")
        out += [f"broken image: {src}" for src in self.broken_images]
        out += [f"empty figure: {src}" for src in self.empty_figures]
        out += [f"error output: {text}" for text in self.error_outputs]
        out += [f"external request: {url}" for url in self.external_requests]
        out += [f"dead link: {href}" for href in self.dead_links]
        out += [f"external link: {href}" for href in self.external_links]
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()


def screenshot_name(page: Path, root: Path) -> str:
    """File name of a page's screenshot: its path under `root`, without html/ folders, '/' -> '__'.

    ``cpu/html/01_eager_vs_compiled.html`` -> ``cpu__01_eager_vs_compiled.png``; ``index.html`` -> ``index.png``.
    """
    relative = Path(os.path.relpath(page, root))
    parts = [("up" if part == ".." else part) for part in relative.parent.parts if part not in ("html", ".")]
    return "__".join([*parts, relative.stem]) + ".png"


def _visit(
    tools: DevTools, path: Path, screenshot: Path | None, load_timeout: float, image_timeout: float
) -> tuple[PageCheck, list[dict[str, str]]]:
    """Load one file in the browser, inspect it and screenshot it; also return its links."""
    url = path.as_uri()
    check = PageCheck(url=url, path=path)
    tools.events.clear()
    navigation = tools.send("Page.navigate", {"url": url})
    if navigation.get("errorText"):
        check.load_error = navigation["errorText"]
        return check, []
    if tools.wait_event("Page.loadEventFired", load_timeout) is None:
        check.load_error = f"no load event within {load_timeout:.0f} s"
        return check, []
    expression = _INSPECT_JS % {"image_timeout_ms": int(image_timeout * 1000)}
    evaluated = tools.send(
        "Runtime.evaluate",
        {"expression": expression, "awaitPromise": True, "returnByValue": True},
        timeout=image_timeout + 15,
    )
    if "exceptionDetails" in evaluated:
        check.load_error = f"inspection failed: {evaluated['exceptionDetails'].get('text', '?')}"
        return check, []
    seen = json.loads(evaluated["result"]["value"])
    check.title = seen["title"]
    check.n_images = seen["n_images"]
    check.broken_images = seen["broken"]
    check.empty_figures = seen["blank"]
    check.error_outputs = seen["errors"]
    if screenshot is not None:
        _screenshot(tools, screenshot)
        check.screenshot = screenshot
    tools.drain()
    requests = [
        event["params"]["request"]["url"]
        for event in tools.events
        if event["method"] == "Network.requestWillBeSent"
    ]
    check.external_requests = list(dict.fromkeys(u for u in requests if not u.startswith(LOCAL_SCHEMES)))
    return check, seen["links"]


def _screenshot(tools: DevTools, target: Path) -> None:
    """A PNG of the whole page (up to MAX_SCREENSHOT_HEIGHT CSS pixels tall)."""
    metrics = tools.send("Page.getLayoutMetrics")
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    clip = {
        "x": 0,
        "y": 0,
        "width": max(1, int(size["width"])),
        "height": max(1, min(int(size["height"]), MAX_SCREENSHOT_HEIGHT)),
        "scale": 1,
    }
    shot = tools.send(
        "Page.captureScreenshot",
        {"format": "png", "clip": clip, "captureBeyondViewport": True},
        timeout=60,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(base64.b64decode(shot["data"]))


def _local_target(link: dict[str, str]) -> Path | None:
    """The file a link of the index points at, or None when it is not a local file."""
    resolved = urllib.parse.urlsplit(link["resolved"])
    if resolved.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(resolved.path))


def _missing_local(links: list[dict[str, str]]) -> list[str]:
    """A page's local links (not fragments, mail or web addresses) whose file does not exist."""
    out = []
    for link in links:
        raw = (link["raw"] or "").strip()
        if not raw or raw.startswith("#") or urllib.parse.urlsplit(raw).scheme.lower() in ("mailto", "javascript",
                                                                                           "http", "https", "data"):
            continue
        target = _local_target(link)
        if target is not None and not target.is_file():
            out.append(f"{raw.split('#', 1)[0]} (no such file)")
    return list(dict.fromkeys(out))


def check_report(
    index: Path,
    screenshots: Path | None,
    *,
    chromium: str | None = None,
    load_timeout: float = 30.0,
    image_timeout: float = 10.0,
) -> list[PageCheck]:
    """Check the report's index and every page it links, in headless Chromium without network.

    Returns one `PageCheck` per page, the index first, then the linked pages in link order. Links
    that are only a fragment are ignored; http(s) links are reported on the index (the report must
    read offline) but not followed; other local links are followed, and a missing file or a page that
    does not load is a dead link of the index. A linked page's own local links must reach a file too, and a
    figure of one colour throughout (nothing drawn) is a problem of its page. Full-page screenshots go to `screenshots` (None: none).
    Raises BrowserUnavailable when there is no Chromium, FileNotFoundError when there is no index.
    """
    index = Path(index).resolve()
    if not index.is_file():
        raise FileNotFoundError(f"no report index at {index}")
    root = index.parent

    def shot(page: Path) -> Path | None:
        return None if screenshots is None else Path(screenshots) / screenshot_name(page, root)

    with launch(chromium) as tools:
        for domain in ("Page", "Network", "Runtime"):
            tools.send(f"{domain}.enable")
        index_check, links = _visit(tools, index, shot(index), load_timeout, image_timeout)
        checks = [index_check]
        targets: dict[Path, str] = {}
        for link in links:
            raw = (link["raw"] or "").strip()
            scheme = urllib.parse.urlsplit(raw).scheme.lower()
            if not raw or raw.startswith("#") or scheme in ("mailto", "javascript"):
                continue
            if scheme in ("http", "https"):
                index_check.external_links.append(raw)
                continue
            target = _local_target(link)
            if target is None:
                index_check.external_links.append(raw)
                continue
            if target != index and target not in targets:
                targets[target] = raw.split("#", 1)[0]
        index_check.links = list(targets.values())
        for target, href in targets.items():
            if not target.is_file():
                index_check.dead_links.append(f"{href} (no such file)")
                continue
            if target.suffix.lower() not in (".html", ".htm"):
                continue  # a data file next to the report: existing is all it has to do
            page, page_links = _visit(tools, target, shot(target), load_timeout, image_timeout)
            page.dead_links = _missing_local(page_links)
            checks.append(page)
            if page.load_error:
                index_check.dead_links.append(f"{href} ({page.load_error})")
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m studylib.browser [outputs_dir]``: check the report, one line per page.

    Exit status: 0 when every page is fine, 1 when any has a problem, 2 when there is no index or no
    Chromium. Screenshots go to outputs/screenshots/<report folder's name>/ (outputs/ is ignored by git, so
    checking the committed reference/ leaves it untouched).
    """
    import argparse

    from studylib import paths

    parser = argparse.ArgumentParser(prog="python -m studylib.browser", description=main.__doc__)
    parser.add_argument("outputs_dir", nargs="?", type=Path, default=None, help="default: the project's outputs/")
    args = parser.parse_args(argv)
    outputs_dir = (args.outputs_dir or paths.outputs_root()).resolve()
    index = outputs_dir / "index.html"
    if not index.is_file():
        print(f"no report index at {index}", file=sys.stderr)
        return 2
    shots = paths.outputs_root() / "screenshots" / outputs_dir.name
    try:
        checks = check_report(index, shots)
    except BrowserUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    failed = False
    for check in checks:
        name = os.path.relpath(check.path, outputs_dir)
        problems = check.problems()
        failed = failed or bool(problems)
        print(f"{name}: " + ("OK" if not problems else "; ".join(problems)))
    print(f"screenshots in {paths.display(shots)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
