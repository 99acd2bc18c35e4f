"""The HTML report in a real browser: headless Chromium, offline (tests/browser.py).

Synthetic pages in tmp_path check the checker; the last test checks the committed reference report.
Chromium is part of the project's environment (the Makefile installs it), so a missing Chromium fails
these tests rather than skipping them.
"""

from __future__ import annotations

import base64
import http.server
import os
import struct
import threading
import time
import zlib
from pathlib import Path

import pytest

import browser
from browser import BrowserUnavailable, PageCheck, check_report
from studylib.core import paths

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REFERENCE_NOTEBOOKS = ("01_eager_vs_compiled", "02_torchscript_vs_xla", "03_onnx_batching", "04_sorted_length_batching")


@pytest.fixture(scope="module", autouse=True)
def chromium() -> str:
    """Every test here needs Chromium; without it they fail (not skip) and say how to get it."""
    found = browser.find_chromium()
    if found is None:
        pytest.fail(
            "Chromium not found (STUDYLIB_CHROMIUM, or chromium / chromium-browser / google-chrome on PATH): "
            "the report's browser check needs it; install it with the Makefile (Debian package `chromium`)",
            pytrace=False,
        )
    return found


def tiny_png(width: int = 4, height: int = 3, *, blank: bool = False) -> bytes:
    """A valid RGB PNG built by hand: red with a blue first row (a drawn figure), or solid red (`blank`)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + (b"\x00\x00\xff" if y == 0 and not blank else b"\xff\x00\x00") * width
                    for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def data_png(raw: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def page(title: str, body: str) -> str:
    return f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>{body}</body></html>'


def nbconvert_output(mime: str, text: str) -> str:
    """An output cell as nbconvert's lab template renders it."""
    return (
        '<div class="jp-OutputArea jp-Cell-outputArea"><div class="jp-OutputArea-child">'
        '<div class="jp-OutputPrompt jp-OutputArea-prompt"></div>'
        f'<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="{mime}" tabindex="0"><pre>{text}</pre>'
        "</div></div></div>"
    )


def write_report(root: Path, pages: dict[str, str], links: list[str]) -> Path:
    """index.html linking `links`, plus `pages` (relative path -> HTML); returns the index."""
    for rel, html in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(html)
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    index = root / "index.html"
    index.write_text(page("Report", f'<h1 id="top">Report</h1><a href="#top">top</a><ul>{items}</ul>'))
    return index


def by_name(checks: list[PageCheck], root: Path) -> dict[str, PageCheck]:
    return {c.path.relative_to(root.resolve()).as_posix(): c for c in checks}


def test_good_report_has_no_problems_and_screenshots_every_page(tmp_path):
    (tmp_path / "cpu" / "html").mkdir(parents=True)
    (tmp_path / "cpu" / "html" / "figure.png").write_bytes(tiny_png(8, 6))
    index = write_report(
        tmp_path,
        {
            "cpu/html/01_first.html": page(
                "01_first",
                f'<h1>First</h1><img alt="embedded" src="{data_png(tiny_png())}"><img alt="file" src="figure.png">'
                + nbconvert_output("text/plain", "all fine"),
            ),
            "summary/html/06_summary.html": page("06_summary", "<p>no figure here</p>"),
        },
        ["cpu/html/01_first.html", "summary/html/06_summary.html#findings", "cpu/html/01_first.html"],
    )
    shots = tmp_path / "shots"
    checks = check_report(index, shots)

    assert [c.problems() for c in checks] == [[], [], []]
    pages = by_name(checks, tmp_path)
    assert list(pages) == ["index.html", "cpu/html/01_first.html", "summary/html/06_summary.html"]
    assert pages["index.html"].links == ["cpu/html/01_first.html", "summary/html/06_summary.html"]
    assert pages["cpu/html/01_first.html"].title == "01_first"
    assert pages["cpu/html/01_first.html"].n_images == 2
    assert sorted(p.name for p in shots.iterdir()) == ["cpu__01_first.png", "index.png", "summary__06_summary.png"]
    for check in checks:
        assert check.screenshot is not None and check.screenshot.read_bytes().startswith(PNG_SIGNATURE)
        assert check.screenshot.stat().st_size > 1000


def test_broken_images_are_reported(tmp_path):
    garbage = data_png(b"this is not a PNG at all" * 4)
    index = write_report(
        tmp_path,
        {"p/html/broken.html": page("broken", f'<img src="{garbage}"><img src="missing.png"><img src="{data_png(tiny_png())}">')},
        ["p/html/broken.html"],
    )
    checks = check_report(index, tmp_path / "shots")
    broken = by_name(checks, tmp_path)["p/html/broken.html"]
    assert broken.n_images == 3
    assert len(broken.broken_images) == 2
    assert broken.broken_images[0].startswith("data:image/png;base64,")
    assert broken.broken_images[1] == "missing.png"
    assert "broken image: missing.png" in broken.problems()
    assert by_name(checks, tmp_path)["index.html"].problems() == []


def test_a_figure_without_alt_text_and_an_answer_below_the_first_screen_are_reported(tmp_path):
    """nbconvert's placeholder alt counts as none; a study page's Answer box must start on a 1280x1000 screen."""
    png = data_png(tiny_png())
    tall = f'<div style="height:{browser.VIEWPORT["height"] + 200}px">decision table</div>'
    index = write_report(tmp_path, {
        "p/html/low.html": page("low", f'<img alt="No description has been provided for this image" src="{png}">'
                                       f'<img src="{png}"><img alt="latency against batch size" src="{png}">'
                                       f'{tall}<div class="answer"><h2>Answer</h2></div>'),
        "p/html/high.html": page("high", f'<div class="answer"><h2>Answer</h2></div>{tall}')},
        ["p/html/low.html", "p/html/high.html"])
    checks = by_name(check_report(index, None), tmp_path)
    low = checks["p/html/low.html"].problems()
    assert [p.split(":")[0] for p in low] == ["figure without alt text"] * 2 + [
        f"the Answer starts {checks['p/html/low.html'].answer_top:.0f} px down, below the first screen (1280x1000)"]
    assert checks["p/html/high.html"].problems() == [] and checks["p/html/high.html"].answer_top < 200


def test_stderr_and_traceback_outputs_are_reported(tmp_path):
    traceback = (
        '<span class="ansi-red-fg">---------------------------------------------------------------------------</span>\n'
        '<span class="ansi-red-fg">ValueError</span>                                Traceback (most recent call last)\n'
        '<span class="ansi-red-fg">ValueError</span>: bad shape'
    )
    index = write_report(
        tmp_path,
        {
            "p/html/stderr.html": page("stderr", nbconvert_output("application/vnd.jupyter.stderr", "I0000 port.cc:153] oneDNN on")),
            "p/html/error.html": page(
                "error",
                '<span id="papermill-error-cell">Execution using papermill encountered an exception here</span>'
                + nbconvert_output("application/vnd.jupyter.stderr", traceback),
            ),
        },
        ["p/html/stderr.html", "p/html/error.html"],
    )
    pages = by_name(check_report(index, None), tmp_path)
    assert pages["p/html/stderr.html"].error_outputs == ["I0000 port.cc:153] oneDNN on"]
    assert pages["p/html/stderr.html"].problems() == ["error output: I0000 port.cc:153] oneDNN on"]
    marker, error = pages["p/html/error.html"].error_outputs
    assert marker == "Execution using papermill encountered an exception here"
    assert "ValueError" in error and "Traceback (most recent call last)" in error and "bad shape" in error


def test_a_known_library_notice_is_shown_but_not_a_problem_and_any_other_stderr_still_is():
    """The two library notices KNOWN_NOTICES names (tf_keras's unseeded initializer, TensorFlow's int32 fallback to
    Eigen) are no error of the run; an unknown line beside them still is."""
    notices = ["/x/tf_keras/src/initializers/initializers.py:121: UserWarning: The initializer TruncatedNormal is "
               "unseeded and being called multiple times",
               "E0000 00:00:1.0  27025 util.cc:131] oneDNN supports DT_INT32 only on platforms with AVX-512."]
    check = PageCheck("file:///p.html", Path("p.html"), error_outputs=[*notices, "RuntimeError: boom"])
    assert all(browser.known_notice(n) for n in notices)
    assert check.problems() == ["error output: RuntimeError: boom"]
    assert not PageCheck("file:///q.html", Path("q.html"), error_outputs=notices).problems()


def test_an_empty_figure_and_a_broken_link_on_a_page_are_reported(tmp_path):
    """A page whose figure has nothing drawn, or which links a local file that is not there, fails the check;
    its links to the web (a seed article) and to files that exist pass."""
    (tmp_path / "p" / "results").mkdir(parents=True)
    (tmp_path / "p" / "results" / "table.csv").write_text("a\n1\n")
    index = write_report(
        tmp_path,
        {"p/html/page.html": page("page", f'<img alt="blank" src="{data_png(tiny_png(blank=True))}">'
                                          f'<img alt="drawn" src="{data_png(tiny_png())}">'
                                          '<a href="../executed/page.ipynb">notebook</a><a href="../results/table.csv">csv</a>'
                                          '<a href="https://example.com/seed">seed</a><a href="#top">top</a>')},
        ["p/html/page.html"],
    )
    checks = by_name(check_report(index, None), tmp_path)
    assert checks["p/html/page.html"].problems() == [
        f"empty figure: {data_png(tiny_png(blank=True))[:60]}... ({len(data_png(tiny_png(blank=True)))} characters)",
        "dead link: ../executed/page.ipynb (no such file)",
    ]
    assert checks["index.html"].problems() == []


def test_dead_and_external_links_of_the_index_are_reported(tmp_path):
    index = write_report(
        tmp_path,
        {"p/html/ok.html": page("ok", "<p>fine</p>")},
        ["p/html/ok.html", "p/html/missing.html", "https://example.com/report.html", "#top"],
    )
    checks = check_report(index, None)
    pages = by_name(checks, tmp_path)
    assert list(pages) == ["index.html", "p/html/ok.html"]
    assert pages["index.html"].dead_links == ["p/html/missing.html (no such file)"]
    assert pages["index.html"].external_links == ["https://example.com/report.html"]
    assert pages["index.html"].problems() == [
        "dead link: p/html/missing.html (no such file)",
        "external link: https://example.com/report.html",
    ]
    assert pages["p/html/ok.html"].problems() == []


@pytest.fixture
def local_server():
    """An HTTP server on the loopback that records what it is asked for."""
    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the handler's API
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/javascript")
            self.end_headers()
            self.wfile.write(b"document.title = 'fetched';")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    server.server_close()


def test_external_requests_are_reported_and_blocked(tmp_path, local_server):
    address, hits = local_server
    host_port = address.replace("127.0.0.1", "localhost")
    index = write_report(
        tmp_path,
        {
            "p/html/external.html": page(
                "external",
                '<script src="https://cdn.example.com/require.min.js"></script>'
                f'<script src="http://{address}/by-address.js"></script>'
                f'<img src="http://{host_port}/by-name.png"><p>text</p>',
            )
        },
        ["p/html/external.html"],
    )
    started = time.monotonic()
    checks = check_report(index, tmp_path / "shots", load_timeout=20)
    elapsed = time.monotonic() - started

    external = by_name(checks, tmp_path)["p/html/external.html"]
    assert external.load_error is None
    assert external.title == "external"  # the script from the loopback never ran
    assert external.external_requests == [
        "https://cdn.example.com/require.min.js",
        f"http://{address}/by-address.js",
        f"http://{host_port}/by-name.png",
    ]
    assert "external request: https://cdn.example.com/require.min.js" in external.problems()
    assert external.broken_images == [f"http://{host_port}/by-name.png"]
    assert hits == [], "the browser reached the network (a server on the loopback)"
    assert elapsed < 15, f"a page with external resources took {elapsed:.0f} s: the check waits on the network"


def _probe_page(tmp_path: Path, address: str) -> str:
    """A file page that asks the loopback server for a script by address and an image by name."""
    probe = tmp_path / "probe.html"
    port = address.rsplit(":", 1)[1]
    probe.write_text(page("probe", f'<script src="http://{address}/by-address.js"></script>'
                                   f'<img src="http://localhost:{port}/by-name.png">'))
    return probe.as_uri()


def test_the_flags_alone_keep_the_browser_offline(tmp_path, local_server):
    """Without Playwright's routing (removed here), Chromium's own flags still refuse every request."""
    address, hits = local_server
    with browser.launch() as tab:
        tab.context.unroute_all()
        failed: list[str] = []
        tab.on("requestfailed", lambda request: failed.append(request.failure or ""))
        tab.goto(_probe_page(tmp_path, address))
        assert tab.title() == "probe"  # the script never ran
    assert hits == [], "the browser reached the network (a server on the loopback)"
    assert len(failed) == 2 and all("BLOCKED_BY_CLIENT" not in f for f in failed), failed  # refused by Chromium


def test_the_loopback_variant_reaches_127_0_0_1_only(tmp_path, local_server):
    """launch(loopback=True), as the JupyterLab test uses it: a server on 127.0.0.1 answers; the same server by
    the name localhost, and any other host, stay cut off."""
    address, hits = local_server
    with browser.launch(loopback=True) as tab:
        tab.goto(_probe_page(tmp_path, address))
        assert tab.title() == "fetched"  # the script from 127.0.0.1 ran
        assert tab.evaluate("fetch('https://example.com/').then(() => 'reached', () => 'refused')") == "refused"
    assert hits == ["/by-address.js"]


def test_no_chromium_is_a_clear_error(tmp_path, monkeypatch):
    index = write_report(tmp_path, {}, [])
    monkeypatch.delenv("STUDYLIB_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert browser.find_chromium() is None
    with pytest.raises(BrowserUnavailable, match="no Chromium found"):
        check_report(index, None)

    monkeypatch.setenv("STUDYLIB_CHROMIUM", str(tmp_path / "no-such-chromium"))
    assert browser.find_chromium() == str(tmp_path / "no-such-chromium")
    with pytest.raises(BrowserUnavailable, match="cannot run"):
        check_report(index, None)
    assert browser.main([str(tmp_path)]) == 2


def test_chromium_named_without_a_path_is_found_on_path(tmp_path, monkeypatch, chromium):
    """STUDYLIB_CHROMIUM may be a bare name: it is looked up on PATH before Playwright is given its path."""
    monkeypatch.setenv("PATH", str(Path(chromium).parent) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("STUDYLIB_CHROMIUM", Path(chromium).name)
    index = write_report(tmp_path, {"p/html/a.html": page("a", "<p>a</p>")}, ["p/html/a.html"])
    assert [c.problems() for c in check_report(index, None)] == [[], []]


def test_main_exit_status_and_one_line_per_page(tmp_path, outputs, capsys):
    assert browser.main([str(tmp_path / "nowhere")]) == 2

    report = tmp_path / "report"
    write_report(report, {"p/html/a.html": page("a", "<p>a</p>")}, ["p/html/a.html"])
    assert browser.main([str(report)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["index.html: OK", "p/html/a.html: OK"]
    # screenshots go under the outputs folder, never into the report checked (reference/ stays clean)
    assert (outputs / "screenshots" / "report" / "p__a.png").is_file()
    assert not (report / "screenshots").exists()

    write_report(report, {"p/html/a.html": page("a", '<img alt="gone" src="gone.png">')}, ["p/html/a.html", "p/html/b.html"])
    assert browser.main([str(report)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["index.html: dead link: p/html/b.html (no such file)", "p/html/a.html: broken image: gone.png"]


def test_screenshot_names():
    root = Path("/r")
    assert browser.screenshot_name(Path("/r/index.html"), root) == "index.png"
    assert browser.screenshot_name(Path("/r/cpu/html/01_eager_vs_compiled.html"), root) == "cpu__01_eager_vs_compiled.png"
    assert browser.screenshot_name(Path("/r/summary/html/06_summary.html"), root) == "summary__06_summary.png"


def test_reference_report_reads_offline_without_problems(tmp_path):
    """The committed reference report (profile cpu): every page loads, no errors, figures show."""
    reference = paths.reference_root()
    index = reference / "index.html"
    assert index.is_file(), f"no reference report at {index}: the project commits one for the cpu profile"
    checks = check_report(index, tmp_path / "screenshots")

    pages = by_name(checks, reference)
    linked = pages["index.html"].links
    for notebook in REFERENCE_NOTEBOOKS:
        assert f"cpu/html/{notebook}.html" in linked, f"the index does not link {notebook} of profile cpu"
        assert pages[f"cpu/html/{notebook}.html"].n_images >= 1, f"{notebook}: no figure on its page"
    for check in checks[1:]:
        assert check.n_images >= 1, f"{check.path}: no figure on its page"
    problems = [f"{name}: {problem}" for name, check in pages.items() for problem in check.problems()]
    assert problems == [], "the reference report has problems:\n" + "\n".join(problems)
    assert all(c.screenshot is not None and c.screenshot.is_file() for c in checks)
