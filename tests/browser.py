"""Check the rendered HTML report in a real (headless) browser, offline.

`check_report` opens ``outputs/index.html`` in headless Chromium, follows every link of the index,
and for each page records broken images, empty (single-colour) figures, error outputs (stderr and
tracebacks as nbconvert renders them), requests that left the machine and dead local links; it saves
a full-page screenshot of every page. The browser runs with its network cut off (every host name
resolves to nothing, every request goes to a proxy that does not exist, and Playwright aborts any
request for another machine before it is sent), so a page that needs the network shows up as a problem
instead of silently fetching something.

The browser is the system's Chromium (`find_chromium`), driven by Playwright through
``executable_path``; Playwright's own browser downloads are never used. ``python tests/browser.py
[outputs_dir]`` runs the check from the command line.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, Request, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from studylib.core import paths

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

BROWSER_FLAGS = ("--disable-gpu", *NETWORK_OFF_FLAGS)
"""Chromium's command line beyond Playwright's own (headless, no sandbox, no first run, no background
networking, no extensions, a fresh temporary profile)."""

VIEWPORT = {"width": 1280, "height": 1000}
"""A reader's first screen: a study page's Answer box must start on it."""
MAX_SCREENSHOT_HEIGHT = 20000
"""Screenshots stop at this many CSS pixels; longer pages are cut."""

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
"""Requests to these schemes stay on the machine; any other request is external."""

OFF_MACHINE = re.compile(r"^(?!(?:file|data|blob|about|chrome|chrome-error|devtools):)")
"""URLs Playwright aborts before Chromium sends them: everything but the schemes that stay on the machine."""

OFF_MACHINE_BUT_LOOPBACK = re.compile(r"^(?!(?:file|data|blob|about|chrome|chrome-error|devtools):"
                                      r"|(?:http|ws)s?://127\.0\.0\.1(?::\d+)?(?:[/?#]|$))")
"""The same with servers on 127.0.0.1 allowed (by address only: the name localhost stays cut off)."""


class BrowserUnavailable(RuntimeError):
    """No Chromium to run: install it (the Makefile does) or set STUDYLIB_CHROMIUM."""


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


def _loopback_allowed(flags: Sequence[str]) -> list[str]:
    """The offline flags, but 127.0.0.1 resolves and bypasses the dead proxy (Chromium's default for loopback)."""
    out = []
    for flag in flags:
        if flag.startswith("--proxy-bypass-list"):
            continue
        out.append(flag + ", EXCLUDE 127.0.0.1" if flag.startswith("--host-resolver-rules") else flag)
    return out


@contextmanager
def launch(chromium: str | None = None, *, loopback: bool = False) -> Iterator[Page]:
    """Start the system's headless Chromium through Playwright, offline, on a fresh profile; yield one page.

    `loopback`: let the page reach servers on 127.0.0.1 (e.g. JupyterLab); everything else stays cut off.
    The browser is closed (and Playwright's driver stopped) on exit, whatever happened.
    Raises BrowserUnavailable when there is no Chromium or it cannot be started.
    """
    executable = chromium or find_chromium()
    if executable is None:
        raise BrowserUnavailable(
            "no Chromium found (looked for STUDYLIB_CHROMIUM, then " + ", ".join(CHROMIUM_NAMES) + " on PATH); "
            "install it (Debian: apt-get install chromium) or set STUDYLIB_CHROMIUM"
        )
    resolved = shutil.which(executable)  # a name on PATH or a path; Playwright needs the path
    if resolved is None:
        raise BrowserUnavailable(f"cannot run {executable}: no such executable")
    with sync_playwright() as playwright:
        try:
            chrome = playwright.chromium.launch(
                executable_path=resolved, args=_loopback_allowed(BROWSER_FLAGS) if loopback else list(BROWSER_FLAGS)
            )
        except PlaywrightError as exc:
            raise BrowserUnavailable(f"cannot run {executable}: {_first_line(exc)}") from exc
        try:
            context = chrome.new_context(viewport=VIEWPORT)
            context.route(OFF_MACHINE_BUT_LOOPBACK if loopback else OFF_MACHINE,
                          lambda route: route.abort("blockedbyclient"))
            yield context.new_page()
        finally:
            chrome.close()


# --------------------------------------------------------------------------------------------------
# Page checks

# Runs in the page once it has loaded: waits for every image to decode (or fail), then reports.
_INSPECT_JS = r"""
async (imageTimeoutMs) => {
  const images = Array.from(document.images);
  for (const img of images) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const settle = Promise.allSettled(images.map(img => img.decode()));
  await Promise.race([settle, new Promise(done => setTimeout(done, imageTimeoutMs))]);
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
  const placeholder = 'No description has been provided';  /* nbconvert's alt where a figure has none */
  const noAlt = images.filter(img => !(img.alt || '').trim() || img.alt.startsWith(placeholder)).map(describe);
  const box = document.querySelector('div.answer');
  const answerTop = box ? box.getBoundingClientRect().top + window.scrollY : null;
  return {title: document.title, n_images: images.length, broken, blank, errors, links, noAlt, answerTop};
}
"""


# Library notices on stderr that are no error of the run, each with why: the page shows them, the check does not count
# them as problems (any other stderr output still is one).
KNOWN_NOTICES = (
    (re.compile(r"UserWarning: The initializer \w+ is unseeded"),
     "tf_keras, when one unseeded initializer builds several weights: the models' weights are random by design"),
    (re.compile(r"oneDNN supports DT_INT32 only on platforms with AVX-512"),
     "TensorFlow: int32 operations run on Eigen, not oneDNN, on a CPU without AVX-512 (a fact of the host)"),
)


def known_notice(text: str) -> str:
    """Why `text` (an error output of a page) is a known library notice; '' where it is not one."""
    return next((why for pattern, why in KNOWN_NOTICES if pattern.search(text)), "")


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
    no_alt: list[str] = field(default_factory=list)
    """Figures without alt text saying what they show (none, or nbconvert's placeholder)."""
    answer_top: float | None = None
    """Where the page's Answer box starts (CSS pixels from the top); None on a page without one."""
    load_error: str | None = None
    screenshot: Path | None = None

    def problems(self) -> list[str]:
        """One readable line per problem; empty when the page is fine."""
        out: list[str] = []
        if self.load_error:
            out.append(f"did not load: {self.load_error}")
        out += [f"broken image: {src}" for src in self.broken_images]
        out += [f"empty figure: {src}" for src in self.empty_figures]
        out += [f"figure without alt text: {src}" for src in self.no_alt]
        if self.answer_top is not None and self.answer_top > VIEWPORT["height"]:
            out.append(f"the Answer starts {self.answer_top:.0f} px down, below the first screen "
                       f"({VIEWPORT['width']}x{VIEWPORT['height']})")
        out += [f"error output: {text}" for text in self.error_outputs if not known_notice(text)]
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


def _first_line(exc: PlaywrightError) -> str:
    """Playwright's message without its call log (``Page.goto: net::ERR_... at file:///...``)."""
    return (exc.message or str(exc)).strip().splitlines()[0]


def _visit(
    page: Page, path: Path, screenshot: Path | None, load_timeout: float, image_timeout: float
) -> tuple[PageCheck, list[dict[str, str]]]:
    """Load one file in the browser, inspect it and screenshot it; also return its links."""
    check = PageCheck(url=path.as_uri(), path=path)
    requests: list[str] = []

    def record(request: Request) -> None:
        requests.append(request.url)

    page.on("request", record)
    try:
        try:
            page.goto(check.url, wait_until="load", timeout=load_timeout * 1000)
        except PlaywrightTimeout:
            check.load_error = f"no load event within {load_timeout:.0f} s"
            return check, []
        except PlaywrightError as exc:
            check.load_error = _first_line(exc)
            return check, []
        try:
            seen = page.evaluate(_INSPECT_JS, int(image_timeout * 1000))
        except PlaywrightError as exc:
            check.load_error = f"inspection failed: {_first_line(exc)}"
            return check, []
        check.title, check.n_images = seen["title"], seen["n_images"]
        check.broken_images, check.empty_figures, check.error_outputs = seen["broken"], seen["blank"], seen["errors"]
        check.no_alt, check.answer_top = seen["noAlt"], seen["answerTop"]
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=screenshot, full_page=True, timeout=60_000,
                            clip={"x": 0, "y": 0, "width": 100_000, "height": MAX_SCREENSHOT_HEIGHT})
            check.screenshot = screenshot
    finally:
        page.remove_listener("request", record)
    check.external_requests = list(dict.fromkeys(u for u in requests if not u.startswith(LOCAL_SCHEMES)))
    return check, seen["links"]


def _local_target(link: dict[str, str]) -> Path | None:
    """The file a link points at, or None when it is not a local file."""
    resolved = urllib.parse.urlsplit(link["resolved"])
    if resolved.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(resolved.path))


def _skipped(raw: str) -> bool:
    """Links that are not checked: empty, fragments of the same page, mail and scripts."""
    return not raw or raw.startswith("#") or urllib.parse.urlsplit(raw).scheme.lower() in ("mailto", "javascript")


def _missing_local(links: list[dict[str, str]]) -> list[str]:
    """A page's local links (not fragments, mail or web addresses) whose file does not exist."""
    out = []
    for link in links:
        raw = (link["raw"] or "").strip()
        if _skipped(raw) or urllib.parse.urlsplit(raw).scheme.lower() in ("http", "https", "data"):
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
    does not load is a dead link of the index. A linked page's own local links must reach a file too,
    and a figure of one colour throughout (nothing drawn) is a problem of its page. Full-page
    screenshots go to `screenshots` (None: none).
    Raises BrowserUnavailable when there is no Chromium, FileNotFoundError when there is no index.
    """
    index = Path(index).resolve()
    if not index.is_file():
        raise FileNotFoundError(f"no report index at {index}")
    root = index.parent

    def shot(page: Path) -> Path | None:
        return None if screenshots is None else Path(screenshots) / screenshot_name(page, root)

    with launch(chromium) as page:
        index_check, links = _visit(page, index, shot(index), load_timeout, image_timeout)
        checks = [index_check]
        targets: dict[Path, str] = {}
        for link in links:
            raw = (link["raw"] or "").strip()
            if _skipped(raw):
                continue
            target = _local_target(link)
            if urllib.parse.urlsplit(raw).scheme.lower() in ("http", "https") or target is None:
                index_check.external_links.append(raw)
            elif target != index and target not in targets:
                targets[target] = raw.split("#", 1)[0]
        index_check.links = list(targets.values())
        for target, href in targets.items():
            if not target.is_file():
                index_check.dead_links.append(f"{href} (no such file)")
                continue
            if target.suffix.lower() not in (".html", ".htm"):
                continue  # a data file next to the report: existing is all it has to do
            checked, page_links = _visit(page, target, shot(target), load_timeout, image_timeout)
            checked.dead_links = _missing_local(page_links)
            checks.append(checked)
            if checked.load_error:
                index_check.dead_links.append(f"{href} ({checked.load_error})")
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/browser.py [outputs_dir]``: check the report, one line per page.

    Exit status: 0 when every page is fine, 1 when any has a problem, 2 when there is no index or no
    Chromium. Screenshots go to outputs/screenshots/<report folder's name>/ (outputs/ is ignored by git, so
    checking the committed reference/ leaves it untouched).
    """

    parser = argparse.ArgumentParser(prog="python tests/browser.py", description=main.__doc__)
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
