"""Across machines, for the summary notebook: every profile's results, claims and headline comparisons."""

from __future__ import annotations

import json
import os

import pandas as pd

from ..bench import profiles
from ..bench.profiles import RESERVED
from ..claims import claims as seedclaims
from ..core import paths, study_registry, wording
from ..core.config import FIELDS
from ..core.files import read_json
from ..machine import environment, limits
from ..stats import verdicts
from ..stats.results import ResultsTable
from ..stats.verdicts import VerdictTable
from ..studies import STUDIES, Comparison
from . import decisions, gpu_paths, prose

WORDS = "report/summary.md.j2"
os.environ.setdefault("USE_TF", "0")  # the analyses need no TensorFlow; transformers would import it


def present_profiles(root=None) -> list[str]:
    """Profiles with at least one results table under outputs/ (smoke and smoke-fast last)."""
    root = root or paths.outputs_root()
    found = [p.name for p in root.iterdir()
             if p.is_dir() and p.name not in RESERVED and any((p / "results").glob("*.jsonl"))] if root.exists() else []
    return sorted(found, key=lambda name: (name in ("smoke", paths.FAST_SMOKE), name))


def _grid_keys(profile: str, notebook: str) -> set[str] | None:
    """The configuration keys of the profile's grid today, or None when params/<profile>.yaml cannot say."""
    try:
        loaded = profiles.load(profile)
    except profiles.ProfileError:
        return None
    return {c.key for c in study_registry.grid(loaded, notebook)} if notebook in loaded.sections else None


def results(profile: str, notebook: str) -> pd.DataFrame:
    """A profile's rows for one notebook with samples (empty if not run): today's grid, the newest per workload."""
    table = ResultsTable(paths.results_dir(profile) / f"{notebook}.jsonl")
    if not table.path.exists():
        return pd.DataFrame()
    df = table.frame(with_samples=True)
    keys = _grid_keys(profile, notebook)
    if keys is not None:
        df = df[df.config_key.isin(keys)]
    workload = [c for c in FIELDS if c not in ("threads", "data") and c in df]  # config.FIELDS, less threads and data
    if len(df) and "timestamp" in df:
        df = df.sort_values("timestamp", kind="stable").drop_duplicates(workload, keep="last")
    return df.reset_index(drop=True)


def verdicts_of(profile: str, notebook: str) -> VerdictTable:
    """A profile's saved verdict table for `notebook`; empty where its run left none."""
    return verdicts.load(verdicts.path_for(paths.results_dir(profile), notebook))


def machines(profiles: list[str]) -> pd.DataFrame:
    """Which machine and software produced each profile's results, and how many configurations ran."""
    rows = []
    for p in profiles:
        env = read_json(paths.results_dir(p) / "env.json") or {}
        counts = {nb: results(p, nb) for nb in STUDIES}
        n = sum(len(df) for df in counts.values())
        ok = sum(int((df.status == "ok").sum()) for df in counts.values() if len(df))
        rows.append({"profile": p, "machine": environment.one_line(env) if env else "environment not captured",
                     "threads": env.get("threads", {}).get("torch_intra_op"),
                     "notebooks": ", ".join(nb[:2] for nb, df in counts.items() if len(df)),
                     "configurations": n, "ran ok": ok, "measured (UTC)": env.get("captured_at", "")})
    return pd.DataFrame(rows)


SUMMARY_CLAIM_COLUMNS = ["profile", "study", *seedclaims.CLAIM_COLUMNS]


def claims(profiles: list[str]) -> pd.DataFrame:
    """Every registered claim on every profile, a row each (judged, not run, or not testable)."""
    registry = seedclaims.registry()
    order = {c.id: i for i, c in enumerate(registry)}
    out = []
    for p in profiles:
        peaks = (read_json(paths.results_dir(p) / "env.json") or {}).get("peaks")  # for the host caveat
        ran = {nb: df for nb in STUDIES if len(df := results(p, nb))}
        judged = [STUDIES[nb].analyse(df, peaks, vt=verdicts_of(p, nb)).claims.assign(study=nb[:2])  # its one table
                  for nb, df in ran.items()]
        rest = [c for c in registry if c.study not in ran]
        judged.append(seedclaims.unassessed(rest, "not run on this profile", _not_run_here)
                      .assign(study=[c.study[:2] if c.study else "—" for c in rest]))
        out.append(pd.concat(judged, ignore_index=True).assign(profile=p))
    if not out:
        return pd.DataFrame(columns=SUMMARY_CLAIM_COLUMNS)
    t = pd.concat(out, ignore_index=True).reindex(columns=SUMMARY_CLAIM_COLUMNS)
    return t.sort_values(["profile", "id"], key=lambda s: s.map(order).fillna(len(order)) if s.name == "id" else s,
                         kind="stable").reset_index(drop=True)


def _not_run_here(claim) -> str:
    return wording.macro(seedclaims.WORDS, "not_run_here", claim.study[:2], seedclaims.testing_profiles(claim))


GROUP_COLUMNS = ["group", "profile", "id", "claim", "verdict", "what would answer it"]


def claim_groups(claims_table: pd.DataFrame) -> pd.DataFrame:
    """The claims table grouped (seed's conditions, proxy, not answerable here with what would answer it)."""
    if not len(claims_table):
        return pd.DataFrame(columns=GROUP_COLUMNS)
    registry = {c.id: c for c in seedclaims.registry()}
    t = claims_table.assign(
        group=claims_table.judgement.map(seedclaims.group),
        **{"what would answer it": [seedclaims.would_answer(registry.get(r.id), r.judgement, r.verdict)
                                    for r in claims_table.itertuples()]})
    t["_group"] = t.group.map(seedclaims.GROUPS.index)
    t = t.sort_values(["_group", "profile"], kind="stable")
    return t[GROUP_COLUMNS].reset_index(drop=True)


def comparisons() -> list[tuple[str, Comparison]]:
    """(notebook, comparison) for every headline speed-up the registered studies name."""
    return [(nb, c) for nb, study in STUDIES.items() for c in study.comparisons]


def headline_speedups(profiles: list[str]) -> pd.DataFrame:
    """One row per declared comparison and profile (decisions.headline of its saved verdict table)."""
    vt = {(p, nb): verdicts_of(p, nb) for p in profiles for nb in STUDIES}
    rows = [{"study": nb[:2], "comparison": c.label, "profile": p,
             "tf32": _policy(results(p, nb)) if len(vt[p, nb]) else "—"} | decisions.headline(vt[p, nb], c.label)
            for p in profiles for nb, c in comparisons()]
    cols = ["study", "comparison", "profile", "tf32", "status", "speedup", "ci_low", "ci_high", "n", "of", "reading",
            "lowest", "highest"]
    return pd.DataFrame(rows).reindex(columns=cols)


def _policy(df: pd.DataFrame) -> str:
    """The precision policy of a profile's rows (their `tf32`: on, off, n/a (cpu)), or "—" without any."""
    labels = sorted({str(v) for v in df["tf32"].dropna()}) if len(df) and "tf32" in df else []
    return ", ".join(labels) or "—"


VERSIONED = ("torch", "tensorflow", "jax", "onnxruntime")


def version_lines(profiles: list[str]) -> list[str]:
    """A sentence per framework whose version differs between the profiles (onnxruntime-gpu as onnxruntime)."""
    envs = {p: read_json(paths.results_dir(p) / "env.json") or {} for p in profiles}
    lines = []
    for name in VERSIONED:
        found = {p: v for p, e in envs.items()
                 if (v := (e.get("gpu_libraries") or {}).get(f"{name}-gpu") or (e.get("libraries") or {}).get(name))}
        if len(set(found.values())) > 1:
            lines.append(wording.macro(WORDS, "versions", name, list(found.items())))
    return lines


def speedup_matrix(table: pd.DataFrame) -> pd.DataFrame:
    """The headline table as a reader scans it: comparisons down, profiles across, 'g× (lo–hi) · n shapes'."""
    def cell(r) -> str:
        if r["status"] != "ok":
            return f"— ({r['status']})"
        if str(r["reading"]).startswith("depends"):  # verdicts differ by shape: the range, never a mean
            counts = r["reading"][len("depends on the shape: "):]
            return wording.macro(WORDS, "by_shape", r["lowest"], r["highest"], counts)
        return wording.macro(WORDS, "shapes", r)

    if not len(table):
        return pd.DataFrame()
    return _by_profile(table.assign(cell=table.apply(cell, axis=1)), ["study", "comparison"], "cell")


def _by_profile(t: pd.DataFrame, index, values: str, profiles: list[str] | None = None) -> pd.DataFrame:
    """`values` of `t` with `index` down and a column per profile (`profiles`, else in the order they come)."""
    m = t.pivot_table(index=index, columns="profile", values=values, aggfunc="first", sort=False)
    return m.reindex(columns=profiles or list(dict.fromkeys(t.profile)))


def gpu_coverage(profiles: list[str]) -> pd.DataFrame:
    """Per profile, which CUDA branches its results exercised (see gpu_paths)."""
    out = []
    for p in profiles:
        rows = [r for nb in STUDIES if len(r := results(p, nb))]
        if not rows:
            continue
        cov = gpu_paths.coverage(pd.concat(rows, ignore_index=True))
        out.append(cov.assign(profile=p)[["branch", "profile", "state"]])
    if not out:
        return pd.DataFrame()
    return _by_profile(pd.concat(out, ignore_index=True), "branch", "state")


def findings(table: pd.DataFrame, claims_table: pd.DataFrame) -> list[str]:
    """Sentences computed from the headline speed-ups and the claims, for the summary notebook."""
    lines = []
    ok = table[table.status == "ok"]
    if "tf32" not in ok:
        ok = ok.assign(tf32="—")
    for comp, whole in ok.groupby("comparison", sort=False):
        split = whole.tf32.nunique() > 1  # rows of different precision policies are never read as like for like
        for policy, g in whole.groupby("tf32", sort=False):
            parts = g.assign(depends=g.reading.astype(str).str.startswith("depends")).to_dict("records")
            lines.append(wording.macro(WORDS, "finding", f"{comp}, TF32 {policy}" if split else comp, parts,
                                       list(g.reading.value_counts().items()), len(g), split))
    missing = table[(table.status != "ok") & (table.status != "not in this profile")]
    for r in missing.itertuples():
        lines.append(wording.macro(WORDS, "no_speedup", r.comparison, r.profile, r.status))
    for p, g in claims_table.groupby("profile", sort=False):
        lines.append(seedclaims.totals_line(g, p))
    lines += version_lines(list(dict.fromkeys(table.profile)))
    if table.profile.nunique() < 2:
        lines.append(wording.macro(WORDS, "one_profile"))
    return lines


def gpu_caveat(device: str) -> str:
    """What a run on `device` (cpu, cuda) says about another machine's ranking."""
    return wording.macro(WORDS, "gpu_caveat", device)


def machine_line(profile: str) -> str:
    """The machine in one line: CPU or GPU, threads, and the limits measured at the run's start."""
    env = read_json(paths.results_dir(profile) / "env.json") or {}
    if not env:
        return "environment not captured"
    peaks = env.get("peaks") or {}
    rates = [(k, limits.peak_gflops(peaks, k)) for k in ("fp32", "bf16", "int8") if limits.peak_gflops(peaks, k)]
    return wording.macro(WORDS, "machine", environment.one_line(env), (env.get("threads") or {}).get("torch_intra_op"),
                         rates, limits.peak_bandwidth(peaks))


def what_to_use(profile: str) -> pd.DataFrame:
    """decisions.what_to_use over each study's saved verdict table of the profile."""
    parts = [decisions.what_to_use(verdicts_of(profile, nb), nb[:2]) for nb in STUDIES]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=decisions.WHAT_TO_USE_COLUMNS)


def across_studies(profile: str) -> pd.DataFrame:
    """decisions.across_studies over the profile's saved verdict tables."""
    return decisions.across_studies({nb: verdicts_of(profile, nb) for nb in STUDIES},
                                    {nb: study.runs for nb, study in STUDIES.items()})


def what_to_use_by_profile(profiles: list[str]) -> pd.DataFrame:
    """what_to_use side by side: a row per study and workload, a column per profile."""
    rows = [{"study": r["study"], "workload": r["workload"], "profile": p,
             "cell": r["decision"] + (f": {r[decisions.SPEEDUP]}" if r[decisions.SPEEDUP] else "")}
            for p in profiles for _, r in what_to_use(p).iterrows()]
    if not rows:
        return pd.DataFrame()
    return _by_profile(pd.DataFrame(rows), ["study", "workload"], "cell", profiles).fillna("not run")


# A claim's short verdict (the claims table's `judgement`) as one word or two for the matrix.
SHORT = {"not comparable on this profile": "not comparable here", "not run on this profile": "not run",
         "not answerable from these results": "no answer", "agrees in direction only": "direction only",
         "not tested by this study": "not tested"}


def _study_title(notebook: str) -> str:
    """A study's page title from its notebook's first heading ('01 · Eager PyTorch vs …')."""
    cells = json.loads(paths.notebook_path(notebook).read_text())["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else notebook
    return first.lstrip("# ").strip()


def opening(names: list[str]) -> str:
    """Markdown: what this page covers, counted from the registry of studies and the profiles with results."""
    return wording.macro(WORDS, "opening", [_study_title(nb) for nb in STUDIES], names)


def answer(names: list[str], claims_table: pd.DataFrame) -> str:
    """Markdown: what to use on each profile's machine, study by study (each study page's Pick, read from its verdict
    table), and who would judge the claims no profile here could; the claims' tallies are `claim_totals`."""
    machines_ = []
    for p in names:
        env = read_json(paths.results_dir(p) / "env.json") or {}
        picks = [(_study_title(nb), f"../../{p}/html/{nb}.html" if _has_page(p, nb) else "",
                  prose.pick_sentence(vt).removeprefix("Pick: ")) for nb in STUDIES
                 if len((vt := verdicts_of(p, nb)).options())]
        machines_.append({"name": p, "machine": environment.machine(env) if env else "", "picks": picks})
    lines = [wording.macro(WORDS, "only", names[0])] if len(names) == 1 else []
    lines += [wording.macro(WORDS, "would_add", who, ids, sorted({i[:3] for i in ids}))
              for who, ids in _would_add(names, claims_table).items()] if names else []
    return wording.block("report/summary_answer.md.j2", machines=machines_, lines=lines)


def claim_totals(names: list[str], claims_table: pd.DataFrame) -> str:
    """Markdown: each profile's claims counted by verdict, one line each."""
    return "\n".join(f"- {seedclaims.totals_line(claims_table[claims_table.profile == p], p)}" for p in names)


def _would_add(names: list[str], claims_table: pd.DataFrame) -> dict[tuple[str, ...], list[str]]:
    """The claims no present profile judged, grouped by the profiles without results that would test them."""
    judged = set(claims_table[~claims_table.judgement.astype(str).str.startswith("not ")].id)
    out: dict[tuple[str, ...], list[str]] = {}
    for claim in seedclaims.registry():
        who = tuple(sorted(p for p in seedclaims.testing_profiles(claim) if p not in names))
        if claim.id not in judged and who:
            out.setdefault(who, []).append(claim.id)
    return out


def _has_page(profile: str, notebook: str) -> bool:
    """Whether the profile's page for `notebook` exists or will be rendered (its executed notebook exists)."""
    return ((paths.html_dir(profile) / f"{notebook}.html").exists()
            or (paths.executed_dir(profile) / f"{notebook}.ipynb").exists())


def verdict_matrix(claims_table: pd.DataFrame) -> str:
    """HTML: each claim down, each profile across, its short verdict linked to the study page with its numbers."""
    profiles = list(dict.fromkeys(claims_table.profile)) if len(claims_table) else []
    pages = {nb[:2]: nb for nb in STUDIES}
    rows = []
    for (claim_id, claim), g in claims_table.groupby(["id", "claim"], sort=False) if len(claims_table) else ():
        cells = []
        for p in profiles:
            r = g[g.profile == p]
            if not len(r):
                cells.append(None)
                continue
            r, nb = r.iloc[0], pages.get(str(r.iloc[0].study))
            cells.append({"word": SHORT.get(r.judgement, str(r.judgement)), "tip": str(r.verdict),
                          "href": f"../../{p}/html/{nb}.html" if nb and _has_page(p, nb) else ""})
        rows.append((str(claim_id), str(claim), cells))
    return wording.block("report/claim_matrix.html.j2", profiles=profiles, rows=rows)
