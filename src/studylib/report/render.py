"""Executed notebooks to HTML (nbconvert) and the index page linking every profile and notebook."""

from __future__ import annotations

from pathlib import Path

from ..bench.profiles import OVERRIDES_KEY, RESERVED, describe_overrides
from ..core import paths, wording
from ..core.files import read_json, write_text_atomic
from ..studies import STUDIES
from . import glossary, prose, seeds, summary

TEMPLATES = Path(__file__).parent / "templates"


# not shown: each page shows what ran as a table instead (StudyRun.parameters_table)
HIDDEN_TAGS = ("parameters", "injected-parameters")


def notebook_html(executed: Path, out: Path) -> Path:
    """Render one executed notebook to a self-contained HTML file: code folded, no prompts, no parameters cells."""
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


def _entry(entry: dict, name: str, href: str, page: Path, headline: str = "") -> dict:
    """One notebook's line of the index: its link, status, headline or failure, run time and start."""
    return {"name": name, "href": href if page.exists() else "", "status": entry.get("status", "?"),
            "headline": headline, "failed_cell": entry.get("failed_cell"), "error": entry.get("error"),
            "early": entry.get("early_replicates_s") or 0,  # its earlier replicates, measured before the notebooks ran
            "took": entry.get("duration_s", 0) + (entry.get("early_replicates_s") or 0),
            "started": str(entry.get("started_at", ""))}


def _headline(profile: str, notebook: str) -> str:
    """A study's headline on the index: its Answer's first sentence, from the profile's saved verdict table."""
    if notebook not in STUDIES:
        return ""
    vt = summary.verdicts_of(profile, notebook)
    return prose.first_sentence(vt) if len(vt) else "no configuration ran ok"


def _profile_section(profile_dir: Path) -> str:
    """A profile's section of the index: its machine, what to use on it and its notebooks."""
    profile = profile_dir.name
    manifest = read_json(paths.manifest_path(profile), {}) or {}
    env = read_json(paths.results_dir(profile) / "env.json") or {}
    rows = [_entry(e, name, f"{profile}/html/{name}.html", paths.html_dir(profile) / f"{name}.html",
                   _headline(profile, name) if e.get("status") == "ok" else "")
            for name, e in sorted(manifest.items()) if name != OVERRIDES_KEY]
    return wording.block("report/index_section.html.j2", p={
        "name": profile, "overridden": describe_overrides(profile), "what_to_use": _what_to_use(profile, env),
        "rows": rows})


def _what_to_use(profile: str, env: dict | None) -> str:
    """The profile's opening table: per study and workload, the decision and what the chosen option costs."""
    table, across = summary.what_to_use(profile), summary.across_studies(profile)
    return wording.block("report/what_to_use.html.j2", machine=summary.machine_line(profile),
                         caveat=summary.gpu_caveat("cuda" if (env or {}).get("gpu_name") else "cpu"),
                         table=table.to_html(index=False, escape=True, classes="what-to-use") if len(table) else "",
                         across=across.to_html(index=False, escape=True, classes="what-to-use across") if len(across) else "")


def index() -> Path:
    """outputs/index.html: every profile found under outputs/, its notebooks, status, run time, environment."""
    root = paths.outputs_root()
    found = sorted(p for p in root.iterdir() if p.is_dir() and p.name not in RESERVED
                   and paths.manifest_path(p.name).exists()) if root.exists() else []
    manifest, name = read_json(paths.summary_dir() / "run.json", {}) or {}, paths.SUMMARY_NOTEBOOK
    across = (_entry(manifest[name], name, f"summary/html/{name}.html", paths.summary_dir() / "html" / f"{name}.html")
              if name in manifest else None)
    page = wording.block("report/index.html.j2", profiles=[_profile_section(p) for p in found], summary=across)
    return write_text_atomic(root / "index.html", page)


def report(profile: str) -> Path:
    """HTML for a profile's executed notebooks and the summary, then the index page."""
    render_profile(profile)
    render_summary()
    return index()
