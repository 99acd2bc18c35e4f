"""Executed notebooks to HTML (nbconvert) and the index page linking every profile and notebook."""

from __future__ import annotations

import html
from pathlib import Path

from ..bench.profiles import OVERRIDES_KEY, RESERVED, describe_overrides
from ..core import paths
from ..core.files import read_json, write_text_atomic
from ..studies import STUDIES
from . import glossary, prose, seeds, summary

TEMPLATES = Path(__file__).parent / "templates"


# The parameters cells (the notebook's defaults, then papermill's injected values) are not shown: each page
# shows what ran as a table instead (StudyRun.parameters_table).
HIDDEN_TAGS = ("parameters", "injected-parameters")


def notebook_html(executed: Path, out: Path) -> Path:
    """Render one executed notebook to a self-contained HTML file (figures embedded, readable offline), code
    folded away (templates/offline), no In/Out prompts, and the parameters cells left out."""
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="offline", extra_template_basedirs=[str(TEMPLATES)], embed_images=True,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.register_preprocessor(TagRemovePreprocessor(remove_cell_tags=HIDDEN_TAGS), enabled=True)
    body, _ = exporter.from_filename(str(executed), resources={"seeds_html": seeds.html_list(),
                                                               "glossary_html": glossary.html_list()})
    return write_text_atomic(out, body)


def render_profile(profile: str) -> list[Path]:
    """HTML for every executed notebook of a profile."""
    return [notebook_html(nb, paths.html_dir(profile) / f"{nb.stem}.html")
            for nb in sorted(paths.executed_dir(profile).glob("*.ipynb"))]


def render_summary() -> list[Path]:
    """HTML for the executed cross-hardware summary, when it has run."""
    executed = paths.summary_dir() / "executed" / f"{paths.SUMMARY_NOTEBOOK}.ipynb"
    return [notebook_html(executed, paths.summary_dir() / "html" / executed.name.replace(".ipynb", ".html"))
            ] if executed.exists() else []


def _entry_row(entry: dict, name: str, href: str, page: Path, headline: str = "") -> str:
    link = f'<a href="{href}">{html.escape(name)}</a>' if page.exists() else html.escape(name)
    status = entry.get("status", "?")
    detail = headline if status == "ok" else html.escape(f"failed at cell {entry.get('failed_cell')}: "
                                                         f"{entry.get('error')}")
    early = entry.get("early_replicates_s") or 0  # its earlier replicates, measured before the notebooks ran
    took = f"{entry.get('duration_s', 0) + early:.0f} s" + (f" ({early:.0f} s of it replicates measured before the "
                                                             f"page ran)" if early else "")
    return (f'<tr class="{status}"><td>{link}</td><td>{status.upper()}</td><td>{detail}</td>'
            f"<td>{took}</td><td>{html.escape(str(entry.get('started_at', '')))}</td></tr>")


def _headline(profile: str, notebook: str) -> str:
    """A study's headline on the index: its Answer's first sentence, from the profile's saved verdict table."""

    if notebook not in STUDIES:
        return ""
    vt = summary.verdicts_of(profile, notebook)
    return html.escape(prose.first_sentence(vt)) if len(vt) else "no configuration ran ok"


_TABLE_HEAD = ("<table><thead><tr><th>notebook</th><th>status</th><th>headline (or failure)</th><th>run time</th>"
               "<th>started (UTC)</th></tr></thead>")


def _summary_section() -> str:
    manifest = read_json(paths.summary_dir() / "run.json", {}) or {}
    name = paths.SUMMARY_NOTEBOOK
    if name not in manifest:
        return ""
    row = _entry_row(manifest[name], name, f"summary/html/{name}.html", paths.summary_dir() / "html" / f"{name}.html")
    return (f'<section id="summary"><h2>Across machines</h2><p class="env">Every profile below side by side: '
            f"the seeds' claims and the headline speed-ups per machine.</p>{_TABLE_HEAD}<tbody>{row}</tbody>"
            f"</table></section>")


def _profile_section(profile_dir: Path) -> str:
    profile = profile_dir.name
    manifest = read_json(paths.manifest_path(profile), {}) or {}
    env = read_json(paths.results_dir(profile) / "env.json")
    rows = [_entry_row(e, name, f"{profile}/html/{name}.html", paths.html_dir(profile) / f"{name}.html",
                       _headline(profile, name) if e.get("status") == "ok" else "")
            for name, e in sorted(manifest.items()) if name != OVERRIDES_KEY]
    body = "\n".join(rows) or '<tr><td colspan="5">no notebook has run for this profile</td></tr>'
    overridden = describe_overrides(profile)
    if overridden:
        overridden = f'<p class="env">{html.escape(overridden)}: a profile of its own, apart from the file\'s.</p>'
    return (f'<section id="{profile}"><h2>Profile <code>{html.escape(profile)}</code></h2>{overridden}'
            f'{_what_to_use(profile, env)}'
            f'<h3>The studies</h3>{_TABLE_HEAD}<tbody>{body}</tbody></table></section>')


def _what_to_use(profile: str, env: dict | None) -> str:
    """The profile's opening table: per study and workload, the decision (decisions.what_to_use, from the saved
    verdict tables) and what the chosen option costs."""
    table = summary.what_to_use(profile)
    device = "cuda" if (env or {}).get("gpu_name") else "cpu"
    intro = (f'<p class="env">Machine: {html.escape(summary.machine_line(profile))}</p>'
             f'<p class="env">{html.escape(summary.GPU_CAVEAT[device])}</p>')
    if not len(table):
        return f"<h3>What to use on this machine</h3>{intro}<p>No workload ran ok on this profile.</p>"
    return (f'<h3>What to use on this machine</h3>{intro}<p class="env">Per workload, the decision: "use X" where X '
            f"is faster than the study's default (eager PyTorch; unsorted batches in study 04) and than the "
            f"runner-up, both with their whole 95% CI beyond the ±5% band; \"X or Y\" where X and the runner-up "
            f"are not told apart; a tie keeps the default. Quantized (int8) options change the outputs and stand "
            f"apart. Latency per call (a pass over the text set in studies 03 and 04) and per item; one-time cost "
            f"= preparation and the first call beyond one steady call.</p>"
            + table.to_html(index=False, escape=True, classes="what-to-use"))


INDEX_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 78rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table.what-to-use { font-size: .85rem; } table.what-to-use td { vertical-align: top; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #ddd; padding: .35rem .5rem;
text-align: left; } tr.failed td { background: #fdecea; } tr.ok td:nth-child(2) { color: #17692b; }
td:nth-child(3) { font-size: .9rem; }
.env { color: #555; font-size: .9rem; }
"""


def index() -> Path:
    """outputs/index.html: every profile found under outputs/, its notebooks, status, run time, environment."""
    root = paths.outputs_root()
    profiles = sorted(p for p in root.iterdir() if p.is_dir() and p.name not in RESERVED
                      and paths.manifest_path(p.name).exists()) if root.exists() else []
    sections = "\n".join(_profile_section(p) for p in profiles) or "<p>No profile has results yet.</p>"
    sections = sections + _summary_section()
    page = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Inference-speed study</title>'
            f"<style>{INDEX_STYLE}</style></head><body><h1>Inference-speed study: results by profile</h1>"
            f"<p>Each profile is one kind of machine and the grid of shapes measured on it. Open a notebook for its "
            f"question, figures and findings.</p>{sections}</body></html>")
    return write_text_atomic(root / "index.html", page)


def report(profile: str) -> Path:
    """HTML for a profile's executed notebooks and the summary, then the index page."""
    render_profile(profile)
    render_summary()
    return index()
