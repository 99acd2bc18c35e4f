"""Study 05's claim evaluators (studylib.claims.claims): seed 002's claims measured on the study's results and tables, or
why they cannot be. They register themselves with claims.register_evaluators,
beside the study module (keras_backends)."""

from __future__ import annotations

import pandas as pd

from ..claims import claims as seedclaims
from ..core import numbers
from ..core.config import REFERENCE, shape_label
from ..runtimes.keras import BACKENDS
from ..stats import speedups as speedups_layer
from ..stats import verdicts
from ..stats.verdict_lookup import Decisions
from .keras_backends import KERAS2, NATIVE_COMPILED, NOTEBOOK, STUDY, _across, _geo, _triple, backend_of, is_keras3


def _every_backend(df: pd.DataFrame, claim):
    """Why a claim that ranks or pools Keras 3's backends cannot be answered: a backend with no ok Keras 3 row
    (seedclaims.not_run: on a GPU where TensorFlow sees none, JAX "first" over torch alone is no answer), or None."""
    if "variant" not in df:
        return None
    keras3 = [v for v in df.variant.dropna().unique() if is_keras3(v)]
    return seedclaims.not_run(df, claim, {f"Keras 3 on {b}": [v for v in keras3 if backend_of(v) == b]
                                          for b in BACKENDS})


def fastest_backend(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'no backend is consistently fastest': holds when the fastest Keras 3 backend differs between
    shapes (counting shapes where its lead over the runner-up is outside the CI)."""
    missing = _every_backend(df, claim)
    if missing:
        return missing
    b = tables["backends"]  # every model: the claim is that the winner changes with the model
    decided = b[b.decided.fillna(False).astype(bool)] if len(b) else b
    if len(decided) < 2:  # one decided shape cannot show the winner changing
        return seedclaims.NotAnswered(f"the fastest backend is decided in {len(decided)} of {len(b)} shape(s); "
                                      f"two decided shapes are needed")
    winners = decided.fastest.map(backend_of)
    rows = df[df.status == "ok"]
    return seedclaims.ClaimMeasurement(None, None, None, "fastest backend (decided shapes): " + "; ".join(
        f"{s}: {w}" for s, w in zip(decided["shape"], winners)), rows=seedclaims.matching(rows, claim),
        holds=winners.nunique() > 1)


def jax_first(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'JAX first on 7 metrics': holds when JAX is the backend most often fastest over decided shapes."""
    missing = _every_backend(df, claim)
    if missing:
        return missing
    b = tables["backends"]
    decided = b[b.decided.fillna(False).astype(bool)] if len(b) else b
    if not len(decided):
        return seedclaims.NotAnswered(f"the fastest backend is decided in none of {len(b)} shape(s)")
    counts = decided.fastest.map(backend_of).value_counts()
    return seedclaims.ClaimMeasurement(None, None, None, "fastest backend over decided shapes: " + ", ".join(
        f"{w} {n}" for w, n in counts.items()), rows=seedclaims.matching(df[df.status == "ok"], claim),
        holds=bool(counts.index[0] == "jax" and (len(counts) == 1 or counts.iloc[0] > counts.iloc[1])))


def share_above(df: pd.DataFrame, tables: dict, claim, at_least: str | float = 1.5, share: str | float = 0.5):
    """Seed 002's 'more than 50% faster in 5 of 10 tasks': holds when, on at least `share` of the shapes, the fastest
    Keras 3 variant's CI over native torch.compile'd PyTorch lies wholly above `at_least`."""
    missing = _every_backend(df, claim)
    if missing:
        return missing
    at_least, share = seedclaims.arithmetic(at_least), seedclaims.arithmetic(share)
    n = tables["native"]
    n = n[n.ratio.notna()] if len(n) else n
    if not len(n):
        return seedclaims.NotAnswered("no shape has Keras 3 beside native torch.compile'd PyTorch")
    above = int((n.ci_low > at_least).sum())
    return seedclaims.ClaimMeasurement(None, None, None, f"above {numbers.fmt_factor(at_least)} on {above} of {len(n)} shape(s)",
                                  rows=seedclaims.matching(df[df.status == "ok"], claim), holds=above >= share * len(n))


def keras3_over_native(df: pd.DataFrame, tables: dict, claim, against: str = "compiled", at: str = "best"):
    """Seed 002's 'Keras 3 beats native PyTorch, up to 3.9×' (`at: best`: the largest per-shape speed-up) and its
    'first-class out-of-the-box performance' (`at: mean`: the geometric mean over shapes) of the fastest Keras 3
    variant over native PyTorch (`compiled`, as the seed's torch.compile, or `eager`), with its CI."""
    missing = _every_backend(df, claim)
    if missing:
        return missing
    n = seedclaims.matching(tables["native"], claim)
    col, lo_col, hi_col = ("ratio", "ci_low", "ci_high") if against == "compiled" else \
        ("vs_eager", "vs_eager_low", "vs_eager_high")
    n = n[n[col].notna()]
    if not len(n):
        return seedclaims.NotAnswered(f"no shape has both a Keras 3 variant and native {against} PyTorch")
    rows = seedclaims.matching(df[df.status == "ok"], claim)
    if at == "mean":
        g = speedups_layer.combine(list(zip(n[col].astype(float), n[lo_col].astype(float), n[hi_col].astype(float))))
        return seedclaims.ClaimMeasurement(g.ratio, g.ci_low, g.ci_high, f"the fastest Keras 3 variant over native {against} "
                                      f"PyTorch, geometric mean over {len(n)} shape(s): " + "; ".join(
                                          f"{s} {b} {numbers.fmt(float(v))}" for s, b, v in zip(n["shape"], n["best Keras 3"],
                                                                                      n[col])),
                                      rows=rows, band=speedups_layer.band(df))
    best = n.loc[n[col].astype(float).idxmax()]
    return seedclaims.ClaimMeasurement(float(best[col]), float(best[lo_col]), float(best[hi_col]),
                                  f"largest over native {against} PyTorch: {best['best Keras 3']} at {best['shape']}; "
                                  f"more than 1.5× in {int((n[col] > 1.5).sum())} of {len(n)} shapes",
                                  rows=rows, band=speedups_layer.band(df))


def native_gap_trend(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'too small a batch makes PyTorch look slower (Python's overhead)': the fastest Keras 3 variant's lead
    over native torch.compile'd PyTorch at the smallest batch over that at the largest, per model and shape,
    geometric mean (above 1: PyTorch falls further behind at the small batch)."""
    missing = _every_backend(df, claim)
    if missing:
        return missing
    n = seedclaims.matching(tables["native"], claim)
    n = n[n.ratio.notna()]
    cells, used = [], []
    for _, g in n.groupby([c for c in _across(n) if c != "batch_size"], dropna=False, sort=False):
        if g.batch_size.nunique() < 2:
            continue
        small, large = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
        cells.append(speedups_layer.ratio_of(*((float(r.ratio), float(r.ci_low), float(r.ci_high))
                                               for r in (small, large))))
        used.append(f"{small['model']}: {numbers.fmt(float(small.ratio))} at b{int(small.batch_size)} vs "
                    f"{numbers.fmt(float(large.ratio))} at b{int(large.batch_size)}")
    if not cells:
        return seedclaims.NotAnswered("Keras 3 and native torch.compile'd PyTorch were not measured at two batch sizes "
                                      "of one model and shape")
    s = speedups_layer.combine(cells)
    return seedclaims.ClaimMeasurement(s.ratio, s.ci_low, s.ci_high, "the fastest Keras 3 over native compiled PyTorch: "
                                  + "; ".join(used), rows=seedclaims.matching(df[df.status == "ok"], claim),
                                  band=speedups_layer.band(df))


def fastest_beats_rest(df: pd.DataFrame, tables: dict, claim, share: str | float = 0.9):
    """Seed 002's 'the fastest Keras 3 choice almost always beats Keras 2 and PyTorch': per shape, whether the fastest
    Keras 3 variant is decided faster than each of native eager PyTorch, native torch.compile and Keras 2, where each
    ran the shape; holds on at least `share` of the shapes. Decided as the study's verdict table (tables["verdicts"])
    decides the pair (native eager: the option's own row); a pair the table does not compare (a Keras 3 variant over
    native torch.compile in another process, unless it is the shape's fastest over runner-up) as verdicts.unlisted
    decides the ratio of the two speed-ups over native eager."""
    missing = _every_backend(df, claim)
    if missing:
        return missing
    share, band = seedclaims.arithmetic(share), speedups_layer.band(df)
    decisions = Decisions(tables.get("verdicts"), STUDY.options)
    sp = tables["speedups"]
    sp = seedclaims.matching(sp[sp.speedup.notna()], claim) if len(sp) else sp
    beats, lines = 0, []
    for _, g in sp.groupby(_across(sp), dropna=False, sort=False) if len(sp) else ():
        keras = g[g.variant.map(is_keras3)]
        if not len(keras):
            continue
        top = keras.loc[keras.speedup.idxmax()]
        # each speed-up is over native eager, paired in its process
        rivals = {"native eager": (top.to_dict() | {"variant": REFERENCE}, _triple(top))}
        for name, variant in (("native compiled", NATIVE_COMPILED), ("Keras 2", KERAS2)):
            other = g[g.variant == variant]
            if len(other):
                rivals[name] = (other.iloc[0], speedups_layer.ratio_of(_triple(top), _triple(other.iloc[0])))
        lost = [name for name, (row, (_, lo, hi)) in rivals.items()
                if (decisions.of(top, row) or verdicts.unlisted(lo, hi, band)) != "faster"]
        beats += not lost
        lines.append(f"{top['variant']} at {shape_label(top, ('model', 'batch_size'), short=True)}: "
                     + ("beats " + ", ".join(rivals) if not lost else "not decided faster than " + ", ".join(lost)))
    if not lines:
        return seedclaims.NotAnswered("no shape has a Keras 3 variant beside native PyTorch")
    return seedclaims.ClaimMeasurement(None, None, None, f"the fastest Keras 3 variant beats every rival on {beats} of "
                                  f"{len(lines)} shape(s) (at least {share:.0%} needed): " + "; ".join(lines),
                                  rows=seedclaims.matching(df[df.status == "ok"], claim),
                                  holds=beats >= share * len(lines))


def keras3_over_keras2(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'Keras 3 is always faster than Keras 2': the geometric mean over shapes of Keras 3 over Keras 2
    on TensorFlow (predict_on_batch), with its CI."""
    k = tables["keras 2"]
    if not len(k):
        return seedclaims.NotAnswered("Keras 2 and Keras 3 on TensorFlow were not both measured on any shape")
    g, lo, hi = _geo(k)
    rows = df[(df.status == "ok") & df.variant.isin([KERAS2, "keras-tensorflow"])]
    return seedclaims.ClaimMeasurement(g, lo, hi, f"keras-tensorflow over keras2-tensorflow, geometric mean over {len(k)} "
                                  f"shape(s): " + "; ".join(f"{s} {numbers.fmt(r.speedup)}" for s, (_, r)
                                                            in zip(k["shape"], k.iterrows())),
                                  rows=rows, band=speedups_layer.band(df))


# the claim evaluators claims.yaml names for this study, registered where claims.evaluator finds them
seedclaims.register_evaluators(NOTEBOOK, fastest_backend, jax_first, share_above, keras3_over_native,
                               native_gap_trend, fastest_beats_rest, keras3_over_keras2)
