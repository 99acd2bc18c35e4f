"""Across machines: every profile's results under outputs/, the seeds' claims and headline speed-ups side by side.

The summary notebook calls these. It works with whatever profiles have results: each study's own
analysis (its claims table) runs on each profile's rows, and the headline comparisons each study names are
summarised per profile as a geometric-mean speed-up over the shapes both sides ran, with a bootstrap CI over every shape's rounds.
"""

from __future__ import annotations

import os

import pandas as pd

from . import environment, gpu_paths, paths, profiles, stats
from .files import read_json
from .profiles import RESERVED
from .results import ResultsTable
from .studies import STUDIES, Comparison
from .studies.common import classify

NOTEBOOK = paths.SUMMARY_NOTEBOOK
os.environ.setdefault("USE_TF", "0")  # the analyses need no TensorFlow; transformers would import it


def present_profiles(root=None) -> list[str]:
    """Profiles with at least one results table under outputs/ (smoke last: its numbers are not real models')."""
    root = root or paths.outputs_root()
    found = [p.name for p in root.iterdir()
             if p.is_dir() and p.name not in RESERVED and any((p / "results").glob("*.jsonl"))] if root.exists() else []
    return sorted(found, key=lambda name: (name == "smoke", name))


def _grid_keys(profile: str, notebook: str) -> set[str] | None:
    """The configuration keys of the profile's grid today, or None when params/<profile>.yaml cannot say."""
    try:
        loaded = profiles.load(profile)
    except profiles.ProfileError:
        return None
    from .run import grid

    return {c.key for c in grid(loaded, notebook)} if notebook in loaded.sections else None


def results(profile: str, notebook: str) -> pd.DataFrame:
    """A profile's rows for one notebook, raw samples included (empty when it has not run).

    A results table keeps rows of configurations the profile no longer runs (its grid or corpus changed);
    only those of today's grid count, and of rows for one workload the newest."""
    table = ResultsTable(paths.results_dir(profile) / f"{notebook}.jsonl")
    if not table.path.exists():
        return pd.DataFrame()
    df = table.frame(with_samples=True)
    keys = _grid_keys(profile, notebook)
    if keys is not None:
        df = df[df.config_key.isin(keys)]
    workload = [c for c in ("model", "variant", "dtype", "batch_size", "device", "seq_len", "image_size", "strategy")
                if c in df]
    if len(df) and "timestamp" in df:
        df = df.sort_values("timestamp", kind="stable").drop_duplicates(workload, keep="last")
    return df.reset_index(drop=True)


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


def claims(profiles: list[str]) -> pd.DataFrame:
    """Every study's seed-claims table for every profile, one row per claim and profile."""
    out = []
    for p in profiles:
        for nb, study in STUDIES.items():
            df = results(p, nb)
            if not len(df):
                continue
            out.append(study.analyse(df).claims.assign(profile=p, study=nb[:2]))
    if not out:
        return pd.DataFrame(columns=["study", "seed", "claim", "profile", "this run", "verdict"])
    t = pd.concat(out, ignore_index=True)
    return t[["study", "seed", "claim", "profile", "this run", "verdict"]].sort_values(
        ["study", "seed", "claim"], kind="stable").reset_index(drop=True)


def comparisons() -> list[tuple[str, Comparison]]:
    """(notebook, comparison) for every headline speed-up the registered studies name."""
    return [(nb, c) for nb, study in STUDIES.items() for c in study.comparisons]


def _geo(df: pd.DataFrame, c: Comparison) -> dict:
    """Geometric-mean speed-up over the shapes both sides ran ok, with its CI; or why there is none."""
    if not len(df) or c.column not in df:
        return {"status": "not run", "n": 0}
    cand, base = df[df[c.column] == c.candidate], df[df[c.column] == c.baseline]
    if not len(cand):
        return {"status": "not in this profile", "n": 0}
    shape = [k for k in c.shape if k in df]

    def by_shape(frame: pd.DataFrame) -> pd.DataFrame:
        ok = frame[frame.status == "ok"]
        return ok.set_index(pd.Index(["|".join(map(str, r)) for r in ok[shape].itertuples(index=False)]))

    ok_c, ok_b = by_shape(cand), by_shape(base)
    both = ok_c.index.intersection(ok_b.index)
    if not len(both):
        failed = cand[cand.status != "ok"]
        why = f"{failed.status.iloc[0]}: {failed.error.iloc[0]}" if len(failed) else "baseline did not run"
        return {"status": why[:160], "n": 0}
    g, lo, hi = stats.geomean_speedup([(ok_b.loc[k], ok_c.loc[k]) for k in both], n_resamples=1000)
    return {"status": "ok", "speedup": g, "ci_low": lo, "ci_high": hi, "n": len(both),
            "of": len(cand), "reading": classify(lo, hi)}


def headline_speedups(profiles: list[str]) -> pd.DataFrame:
    """One row per comparison and profile: geometric-mean speed-up, its 95% CI, shapes used, or why none."""
    rows, frames = [], {}
    for p in profiles:
        for nb, c in comparisons():
            if (p, nb) not in frames:
                frames[p, nb] = results(p, nb)
            rows.append({"study": nb[:2], "comparison": c.label, "profile": p} | _geo(frames[p, nb], c))
    cols = ["study", "comparison", "profile", "status", "speedup", "ci_low", "ci_high", "n", "of", "reading"]
    return pd.DataFrame(rows).reindex(columns=cols)


def speedup_matrix(table: pd.DataFrame) -> pd.DataFrame:
    """The headline table as a reader scans it: comparisons down, profiles across, 'g× (lo–hi) · n shapes'."""
    def cell(r) -> str:
        if r["status"] != "ok":
            return f"— ({r['status']})"
        return f"{r['speedup']:.2f}× ({r['ci_low']:.2f}–{r['ci_high']:.2f}) · {int(r['n'])}/{int(r['of'])} shapes"

    if not len(table):
        return pd.DataFrame()
    t = table.assign(cell=table.apply(cell, axis=1))
    order = list(dict.fromkeys(table.profile))
    m = t.pivot_table(index=["study", "comparison"], columns="profile", values="cell", aggfunc="first", sort=False)
    return m.reindex(columns=order)


def gpu_coverage(profiles: list[str]) -> pd.DataFrame:
    """Per profile, which CUDA branches its results exercised (see gpu_paths)."""
    out = []
    for p in profiles:
        rows = [results(p, nb) for nb in STUDIES]
        df = pd.concat([r for r in rows if len(r)], ignore_index=True) if any(len(r) for r in rows) else pd.DataFrame()
        if not len(df):
            continue
        cov = gpu_paths.coverage(df)
        out.append(cov.assign(profile=p)[["branch", "profile", "state"]])
    if not out:
        return pd.DataFrame()
    t = pd.concat(out, ignore_index=True)
    return t.pivot_table(index="branch", columns="profile", values="state", aggfunc="first", sort=False)


def _verdict_word(verdict: str) -> str:
    return str(verdict).split(" (")[0]


def verdict_matrix(claims_table: pd.DataFrame) -> pd.DataFrame:
    """The headline: each seed claim down, each profile across, the verdict in a few words."""
    if not len(claims_table):
        return pd.DataFrame()
    t = claims_table.assign(verdict=claims_table.verdict.map(_verdict_word))
    m = t.pivot_table(index=["study", "seed", "claim"], columns="profile", values="verdict",
                      aggfunc=lambda v: " / ".join(dict.fromkeys(v)), sort=False)
    return m.reindex(columns=list(dict.fromkeys(claims_table.profile))).fillna("not run")


def findings(table: pd.DataFrame, claims_table: pd.DataFrame) -> list[str]:
    """Sentences computed from the headline speed-ups and the claims, for the summary notebook."""
    lines = []
    ok = table[table.status == "ok"]
    for comp, g in ok.groupby("comparison", sort=False):
        parts = [f"{r.profile} {r.speedup:.2f}× ({r.ci_low:.2f}–{r.ci_high:.2f})" for r in g.itertuples()]
        readings = g.reading.value_counts()
        where = ", ".join(f"{word} on {n}" for word, n in readings.items())
        lines.append(f"**{comp}**: {'; '.join(parts)} — {where} of {len(g)} profile(s) measured.")
    missing = table[(table.status != "ok") & (table.status != "not in this profile")]
    for r in missing.itertuples():
        lines.append(f"{r.comparison} on {r.profile}: no speed-up ({r.status}).")
    for p, g in claims_table.groupby("profile", sort=False):
        words = g.verdict.map(_verdict_word)
        lines.append(f"Claims on {p}: {int((words == 'agrees').sum())} agree, "
                     f"{int((words == 'does not agree').sum())} do not, {len(g)} checked in all "
                     f"(the rest mixed, inconclusive, or not measured at this profile's sizes).")
    if table.profile.nunique() < 2:
        lines.append("Only one profile has results here, so nothing is compared across machines yet: run a GPU "
                     "profile (`make report PROFILE=gpu-a100`, ...) and render this summary again.")
    return lines
