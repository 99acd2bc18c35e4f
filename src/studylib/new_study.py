"""`python -m studylib new-study NAME`: a new study that runs at once (module, notebook, templates, smoke sections and
a commented-out cpu section), eager against torch.compile; its TODO comments say what its author replaces."""

from __future__ import annotations

import importlib
import json
import keyword
import re
import sys
from pathlib import Path

import yaml

from .bench import profiles
from .core import paths
from .studies import STUDIES

NAME = re.compile(r"(\d{2})_([a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*)")
MAX_NAME, MAX_TITLE = 32, 80
SMOKE_PROFILES = ("smoke", paths.FAST_SMOKE)  # the study runs in these at once; the cpu profile has it commented out
SECTION = {"models": ["bert-tiny"], "variants": ["eager", "compile-default"], "dtypes": ["fp32"],
           "batch_sizes": [1, 4], "seq_lens": [16]}
CPU_SECTION = {"models": ["bert-base"], "variants": ["eager", "compile-default"], "dtypes": ["fp32"],
               "batch_sizes": [1, 8], "seq_lens": [128]}


class Refused(ValueError):
    """A NAME or title new-study refuses, with the one line that says why."""


def check(name: str, title: str | None, root: Path) -> tuple[str, str]:
    """The study's module name and title, or Refused where NAME is malformed or taken (nothing is written)."""
    m = NAME.fullmatch(name)
    if m and len(name) > MAX_NAME:
        raise Refused(f"NAME {name!r}: at most {MAX_NAME} characters (it names a module, a class and a page)")
    if not m:
        raise Refused(f"NAME {name!r}: must be two digits, an underscore and lowercase words joined by underscores "
                      f"(e.g. 08_speculative_decoding)")
    number, module = m.groups()
    if keyword.iskeyword(module) or module in ("base", "common"):
        raise Refused(f"NAME {name!r}: {module!r} cannot name a study module; choose other words")
    notebooks = {p.stem for p in (root / "notebooks").glob("*.ipynb")} | set(STUDIES)
    same = sorted(n for n in notebooks if n[:2] == number)
    if same:
        raise Refused(f"NAME {name!r}: number {number} is taken by {same[0]}; the next free one is "
                      f"{_next_free(notebooks)}")
    for taken in (root / "src" / "studylib" / "studies" / f"{module}.py", _templates(root, name)):
        if taken.exists():
            raise Refused(f"NAME {name!r}: {taken.relative_to(root)} exists; choose other words")
    for profile in SMOKE_PROFILES + ("cpu",):
        text = (root / "params" / f"{profile}.yaml").read_text()
        if re.search(rf"^\s*#?\s*{re.escape(name)}:", text, re.M):
            raise Refused(f"NAME {name!r}: params/{profile}.yaml already has a section {name!r}")
    title = " ".join((title or module.replace("_", " ").capitalize()).split())
    if not title or len(title) > MAX_TITLE or '"' in title or "\\" in title:
        raise Refused(f"--title: must be 1 to {MAX_TITLE} characters without double quotes or backslashes (it heads "
                      f"the page and the module's docstring)")
    return module, title


def _templates(root: Path, name: str) -> Path:
    """The study's wording folder (core/wording.py): templates/studies/NAME/."""
    return root / "src" / "studylib" / "templates" / "studies" / name


def _next_free(notebooks: set[str]) -> str:
    used = {int(n[:2]) for n in notebooks if n[:2].isdigit()}
    return f"{next(i for i in range(1, 100) if i not in used):02d}"


def new_study(name: str, title: str | None = None) -> int:
    """Write the study NAME into studylib's checkout and print what was written; 0, or 2 (nothing written)."""
    root = paths.ROOT
    try:
        module, title = check(name, title, root)
    except Refused as e:
        print(f"error: new-study: {e}", file=sys.stderr)
        return 2
    studies_dir = root / "src" / "studylib" / "studies"
    written = [studies_dir / f"{module}.py", _templates(root, name) / FINDINGS, root / "notebooks" / f"{name}.ipynb",
               *(root / "params" / f"{p}.yaml" for p in (*SMOKE_PROFILES, "cpu"))]
    before = {path: path.read_text() if path.exists() else None for path in written}
    try:
        _write(root, written, name, module, title)
    except BaseException:  # a half-written study is worse than none: put every file back as it was
        for path, text in before.items():
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)
        if _templates(root, name).is_dir():
            _templates(root, name).rmdir()
        raise
    print(f"wrote the study {name} ({title}):")
    for path in written:
        print(f"  {path.relative_to(root)}")
    print(f"next: python -m studylib plan --profile {paths.FAST_SMOKE}; make report PROFILE={paths.FAST_SMOKE} "
          f"NOTEBOOK={name}; then replace the TODOs (the question, the comparisons, the grid)")
    return 0


def _write(root: Path, written: list[Path], name: str, module: str, title: str) -> None:
    written[0].write_text(MODULE.format(notebook=name, number=name[:2], title=title, section=_camel(module)),
                          encoding="utf-8")
    written[1].parent.mkdir(parents=True, exist_ok=True)
    written[1].write_text(TEMPLATE, encoding="utf-8")
    for profile in SMOKE_PROFILES:
        _append(root / "params" / f"{profile}.yaml", _section_yaml(name, SECTION, comment=False))
    _append(root / "params" / "cpu.yaml", _section_yaml(name, CPU_SECTION, comment=True))
    _write_notebook(written[2], name, module, title)  # before the profiles are read: they check it exists
    importlib.import_module(f"studylib.studies.{module}")  # registers it, so the profiles validate its sections
    for profile in SMOKE_PROFILES:  # the new sections, read through the new study's own schema
        profiles.load(profile).settings_for(name)


def _camel(module: str) -> str:
    return "".join(w.capitalize() for w in module.split("_"))


def _section_yaml(name: str, section: dict, *, comment: bool) -> str:
    lines = [f"{name}:"] + [f"  {k}: {yaml.safe_dump(v, default_flow_style=True).strip()}" for k, v in section.items()]
    if comment:
        return ("  # " + name + " (python -m studylib new-study): left out of the reference until its question and grid\n"
                "  # are settled; uncomment it then (make plan says what it adds to the hour of make reference).\n"
                + "".join(f"  # {line}\n" for line in lines))
    lines += ["  left_out: >", "    Everything but a tiny text model at two batch sizes: the grid new-study starts from (TODO)."]
    return "".join(f"  {line}\n" for line in lines)


def _append(profile: Path, section: str) -> None:
    """Append a section to a profile whose last top-level key is `notebooks` (every profile in params/ ends so)."""
    text = profile.read_text()
    if list(yaml.safe_load(text))[-1] != "notebooks":
        raise RuntimeError(f"{profile.name}: `notebooks` is not its last key; add the section by hand")
    profile.write_text(text.rstrip("\n") + "\n" + section)


# A study notebook's parameters cell: the profile and explicit changes to it (study.start loads and validates them).
PARAMETERS = (
    "# Parameters: the profile and your changes to it; `studylib run` sets all three.\n"
    "# profile: a name under params/ (smoke: tiny models, a minute or two on a CPU) or the path of a YAML file.\n"
    "# overrides: the values you change, keyed as `studylib run --set` keys are (docs/profiles.md), e.g.\n"
    "# {\"batch_sizes\": [1, 4], \"measure.replicates\": 1}; a field of this study's section needs no \"NN.\" prefix\n"
    "# (`measure` is then the section's own), a profile-wide key is written as it is ({\"threads\": 4}).\n"
    "# Results of an overridden profile go to outputs/<profile>+<hash>/. Edit, then run the cells below again.\n"
    "profile = \"smoke\"\n"
    "overrides = {}\n"
    "force = False  # True re-measures configurations already in the results table")

# then three cells, one step each, each saying in its first line what re-running it does
STEPS = {
    "start": "# Start. Re-running it reads and checks the profile with the overrides (cached: an unchanged file is not "
             "read again).",
    "measure": "# Measure. Re-running it measures only what is not measured yet (force = True: everything again), then "
               "decides the verdicts.",
    "answer": "# Answer. Re-running it analyses the rows measured and shows the decision table and the Answer again; it "
              "measures nothing.",
}


def _write_notebook(path: Path, name: str, module: str, title: str) -> None:
    alias = f"s{name[:2]}"
    cells = [(cid, kind, src.replace("{alias}", alias).replace("{module}", module).replace("{title}", title)
              .replace("{number}", name[:2])) for cid, kind, src in CELLS]
    cells.insert(1, ("c01", "parameters", PARAMETERS))
    nb = {"cells": [_cell(*c) for c in cells],
          "metadata": {"kernelspec": {"display_name": "Python (studylib)", "language": "python", "name": "studylib"},
                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _cell(cid: str, kind: str, source: str) -> dict:
    lines = source.splitlines(keepends=True)
    if kind == "markdown":
        return {"cell_type": "markdown", "id": cid, "metadata": {}, "source": lines}
    tags = {"tags": ["parameters"]} if kind == "parameters" else {}
    return {"cell_type": "code", "execution_count": None, "id": cid, "metadata": tags, "outputs": [], "source": lines}


MODULE = '''"""Study {number}: {title}.

The grid, and the analysis its notebook shows. Written by `python -m studylib new-study`: eager PyTorch against
torch.compile (and TorchScript, where a profile lists it) on a text model. TODO: the question, the comparisons and the
grid are this study's to decide.
"""

from __future__ import annotations

import pandas as pd
from pydantic import model_validator

from .. import runtimes
from ..bench import surprises
from ..bench.schemas import Grid
from ..claims import claims as seedclaims
from ..core.config import REFERENCE, Config, is_aa, with_aa
from ..core.wording import macro
from ..stats import speedups, verdicts
from ..stats.speedups import Comparison
from ..workloads.models import MODELS
from .base import Analysis, Study, register
from .common import aa_finding, describe_ci, drift_lines, failures_and_noise, latency_table, size_label

NOTEBOOK = "{notebook}"
WORDS = f"studies/{{NOTEBOOK}}/findings.md"  # this study's sentences (core/wording.py)
# TODO: the variants this study compares; every registered runtime is accepted (eager is every speed-up's baseline)
Variant = runtimes.offered()
# What should hold (a candidate faster than, or equal to, its baseline): a replicate that contradicts it profiles one
# call of each side after its rounds (surprises.py). TODO: this study's expectations.
EXPECTATIONS = (surprises.Expectation("compile-default", REFERENCE),)


class {section}(Grid):
    """Section of study {number}: text models, batch sizes and sequence lengths, and the variants compared."""

    variants: list[Variant]

    @model_validator(mode="after")
    def _text_models(self) -> {section}:
        for name in self.models:
            if MODELS[name].kind != "text":
                raise ValueError(f"models: {{name!r}} is not a text model (this study's inputs are token ids)")
        return self


def configs(section: {section}, *, device: str, threads: int) -> list[Config]:
    """Every shape of the grid: eager first, then the other variants, each one `aa` names followed by its A/A copy."""
    variants = with_aa([REFERENCE] + [v for v in section.variants if v != REFERENCE], section.aa)
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq)
            for model, dtype, batch, seq in section.shapes() for v in variants]


def estimate_s(c: Config, section: {section}, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`, per replicate: a cold torch.compile, then the first call, the warm-up and
    the minimum rounds (per-call costs guessed for 2 CPU cores; `speed` is the machine's speed relative to that)."""
    big = not c.model.endswith("tiny")
    compile_s = (14.0 if big else 4.0) if runtimes.family(c.variant) == "compile" else 0.0
    per_call = (0.1 if big else 0.002) * c.batch_size * (c.seq_len or 128) / 128
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (compile_s + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / 5)


def speedup_table(df: pd.DataFrame, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """Every variant over eager on the same shape, paired by round, with the decision the run's verdict table `vt`
    holds (the one every element of the page reads)."""
    t = speedups.pair_table(df, None, REFERENCE, band=speedups.EQUIVALENCE)
    t["verdict"] = [verdicts.decision_at(vt, r.candidate, r.baseline, r) if pd.notna(r.speedup)
                    else None for r in t.itertuples()] if len(t) else []
    return t


def _where(row) -> str:
    return macro(WORDS, "where", row, size_label(row))


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """The study's own findings, beside the verdicts the page lists first: each speed-up with its CI, the A/A control,
    what failed, the noise and the drift."""
    lines = [aa_finding(df)]
    for _, r in sp[sp.speedup.notna() & ~sp.variant.map(is_aa)].iterrows():
        lines.append(macro(WORDS, "speedup", _where(r), describe_ci(r), r["verdict"]))
    return lines + failures_and_noise(df, _where) + drift_lines(df)


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """Speed-ups over eager, the measurements table, the findings, the claims of the registry this study tests
    (claims/claims.yaml; none until it names some) and the surprises, every decision as the run's verdict table `vt`
    (StudyRun.verdicts) has it. `peaks` is unused (no roofline here)."""
    sp = speedup_table(df, vt)
    analysis = Analysis(tables={{"speedups": sp, "measurements": latency_table(df)}}, findings=findings(df, sp),
                        claims=seedclaims.study_claims(NOTEBOOK, df, {{"speedups": sp}}, vt=vt))
    return surprises.attach(analysis, df, EXPECTATIONS)


STUDY = register(Study(
    NOTEBOOK, {section}, configs, estimate_s, analyse,
    # TODO: the comparisons the Answer box, the index's "What to use" and the summary give: (words, candidate, baseline)
    comparisons=(Comparison("torch.compile (default) over eager", "compile-default", "eager"),),
    expectations=EXPECTATIONS,
))
'''

FINDINGS = "findings.md"
# The study's findings in words, one macro a sentence (core/wording.macro): Python hands them the numbers.
TEMPLATE = """{% macro where(row, size) %}
{{ row["variant"] }} {{ row["model"] }} {{ row["dtype"] }} batch {{ row["batch_size"] }} {{ size }}
{% endmacro %}
{% macro speedup(where, ci, verdict) %}
{{ where }}: {{ ci }} over eager ({{ verdict }}).
{% endmacro %}
"""

CELLS = [
    ("c00", "markdown", "# {number} · {title}\n\n"
     "**Question.** TODO: the question in the reader's words — which workload, which options, what decides. As "
     "written,\nthe study asks how much faster than eager PyTorch `torch.compile` runs a small text model, at each "
     "batch size."),
    # start, measure, answer: each cell re-runs one step, and says which in its first line (STEPS)
    ("c02", "code", STEPS["start"] + "\n%matplotlib inline\nfrom studylib.report import plots\nfrom studylib import study\n"
     "from studylib.studies import {module} as {alias}\n\n"
     "ctx = study.start({alias}.NOTEBOOK, profile, overrides=overrides, force=force)"),
    ("measure", "code", STEPS["measure"] + "\n"
     "df = ctx.run({alias}.configs(ctx.section, device=ctx.settings.device, threads=ctx.settings.threads))"),
    ("answer", "code", STEPS["answer"] + "\n"
     "analysis = {alias}.analyse(df, vt=ctx.verdicts)  # tables, findings and claims, from df and its verdicts\n"
     "sp = analysis.tables[\"speedups\"]\nctx.answer(df)"),
    ("about-md", "markdown", "## About this study\n**How it is measured.** Models are built from transformers "
     "configs with random weights and a fixed seed.\nEach variant's output is compared with eager PyTorch on the same "
     "inputs; then eager, its A/A copy `eager-aa` and\nthe other variants of a shape are timed together in rounds, each "
     "round in a fresh random order, so drift\nof the machine cancels in the per-round ratios. TODO: what else a reader "
     "needs to trust the numbers."),
    ("c03", "markdown", "## What ran\nThe parameters this page was run with, and the machine and libraries that "
     "produced the numbers."),
    ("c04", "code", "ctx.what_ran()"),
    ("c05", "markdown", "## Measurements\nOne row per configuration. Failed configurations stay in the table with "
     "their status and message."),
    ("c06", "code", "from studylib.report import tables\n\n"
     "tables.folded(analysis.tables[\"measurements\"], f\"{{alias}.NOTEBOOK}_measurements\")"),
    ("c07", "markdown", "## Latency by batch size\nMedian latency per call, with the 95% CI of the median as a band "
     "(log scales)."),
    ("c08", "code", "df[\"workload\"] = df.model + \" · \" + df.apply({alias}.size_label, axis=1)\n"
     "plots.lines_with_ci(df, x=\"batch_size\", y=\"median_s\", lo=\"ci_low_s\", hi=\"ci_high_s\", hue=\"variant\",\n"
     "                    row=\"workload\", col=\"dtype\", scale=1e3, logy=True, xlabel=\"batch size\",\n"
     "                    ylabel=\"latency per call (ms)\", title=\"Steady-state latency, median and 95% CI\",\n"
     "    caption=\"Lower is faster; where two variants' CI bars overlap, this run cannot tell them apart.\");"),
    ("c09", "markdown", "## Speed-up over eager\nThe median of the per-round ratios eager latency / variant latency on "
     "the same shape, with its 95% CI;\nthe grey band is the ±5% band the verdicts use."),
    ("c10", "code", "if len(sp):\n"
     "    sp[\"workload\"] = sp.model + \" · \" + sp.apply({alias}.size_label, axis=1)\n"
     "    plots.speedup_points(sp, row=\"workload\", col=\"dtype\",\n"
     "                         title=\"Speed-up over eager (95% CI)\",\n"
     "                         caption=\"Above the dashed line a variant is faster than eager; a speed-up whose CI "
     "lies in the grey band is equal.\");\n"
     "else:\n    print(\"No variant but eager in this grid.\")"),
    ("c15", "markdown", "## Findings\nComputed from the results above."),
    ("c16", "code", "ctx.findings(analysis)"),
    ("c17", "markdown", "## Surprises, and what the profiler says\nWhere a variant meant to be faster was slower than "
     "its baseline, one call of each was profiled."),
    ("c18", "code", "ctx.surprises(df)"),
    ("c19", "markdown", "## Beside the published claims\nThe registry's claims this study tests "
     "(src/studylib/claims/claims.yaml; none until it names some)."),
    ("c20", "code", "ctx.claims(analysis)"),
    ("c21", "markdown", "## Caveats\n- Random weights: speed does not depend on weight values.\n"
     "- The numbers hold for this machine, this thread count and these library versions (see What ran).\n"
     "- TODO: what this study's design leaves out."),
    ("c22", "code", "ctx.gpu_note(df)"),
    ("how-sure-md", "markdown", "## How sure are we\nThe verdict rule, the A/A controls, how far a same-host re-run "
     "may move each speed-up, and every verdict\nof this page with its statistics (computed once per run)."),
    ("how-sure-code", "code", "ctx.how_sure(df)"),
]
