"""Executed notebooks to HTML (nbconvert) and the index page linking every profile and notebook."""

from __future__ import annotations

import html
from pathlib import Path

from . import environment, paths
from .results import read_json, write_text_atomic
from .run import manifest_path

TEMPLATES = Path(__file__).parent / "templates"


def notebook_html(executed: Path, out: Path) -> Path:
    """Render one executed notebook to a self-contained HTML file (figures embedded, readable offline)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="offline", extra_template_basedirs=[str(TEMPLATES)], embed_images=True)
    body, _ = exporter.from_filename(str(executed))
    return write_text_atomic(out, body)


def render_profile(profile: str) -> list[Path]:
    """HTML for every executed notebook of a profile."""
    return [notebook_html(nb, paths.html_dir(profile) / f"{nb.stem}.html")
            for nb in sorted(paths.executed_dir(profile).glob("*.ipynb"))]


def _profile_section(profile_dir: Path) -> str:
    profile = profile_dir.name
    manifest = read_json(manifest_path(profile), {}) or {}
    env = read_json(paths.results_dir(profile) / "env.json")
    env_line = html.escape(environment.one_line(env)) if env else "environment not captured"
    rows = []
    for name, e in sorted(manifest.items()):
        page = paths.html_dir(profile) / f"{name}.html"
        link = f'<a href="{profile}/html/{name}.html">{html.escape(name)}</a>' if page.exists() else html.escape(name)
        status = e.get("status", "?")
        detail = "" if status == "ok" else html.escape(f"cell {e.get('failed_cell')}: {e.get('error')}")
        rows.append(f'<tr class="{status}"><td>{link}</td><td>{status.upper()}</td>'
                    f"<td>{e.get('duration_s', 0):.0f} s</td><td>{html.escape(str(e.get('started_at', '')))}</td>"
                    f"<td>{detail}</td></tr>")
    body = "\n".join(rows) or '<tr><td colspan="5">no notebook has run for this profile</td></tr>'
    return (f'<section id="{profile}"><h2>Profile <code>{html.escape(profile)}</code></h2>'
            f'<p class="env">{env_line}</p><table><thead><tr><th>notebook</th><th>status</th><th>run time</th>'
            f"<th>started (UTC)</th><th>failure</th></tr></thead><tbody>{body}</tbody></table></section>")


INDEX_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #ddd; padding: .35rem .5rem;
text-align: left; } tr.failed td { background: #fdecea; } tr.ok td:nth-child(2) { color: #17692b; }
.env { color: #555; font-size: .9rem; }
"""


def index() -> Path:
    """outputs/index.html: every profile found under outputs/, its notebooks, status, run time, environment."""
    root = paths.outputs_root()
    profiles = sorted(p for p in root.iterdir() if p.is_dir() and manifest_path(p.name).exists()) if root.exists() else []
    sections = "\n".join(_profile_section(p) for p in profiles) or "<p>Nothing has run yet: try <code>make report</code>.</p>"
    page = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Inference-speed study</title>'
            f"<style>{INDEX_STYLE}</style></head><body><h1>Inference-speed study: results by profile</h1>"
            f"<p>Each profile is one kind of machine (params/&lt;profile&gt;.yaml). Open a notebook for its "
            f"question, figures and findings.</p>{sections}</body></html>")
    return write_text_atomic(root / "index.html", page)


def report(profile: str) -> Path:
    """HTML for a profile's executed notebooks, then the index page."""
    render_profile(profile)
    return index()
