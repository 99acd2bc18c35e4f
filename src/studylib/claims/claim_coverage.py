"""How far a profile's rows cover a seed claim's conditions (docs/method.md, "Judging a seed claim", step 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..core import wording
from ..workloads import models as model_registry
from .claim_registry import DEFINING, Claim, sizes_text

SEED_CONDITIONS = "the seed's conditions (except hardware, threads and versions)"
MIN_BATCHES = 4  # batches of the largest batch size a pass over the texts needs for its speed ratio
SIZES = ("batch_sizes", "seq_lens")
_LABELS = {"models": "model", "precision": "precision", "batch_sizes": "batch", "seq_lens": "sequence"}
WORDS = "claims/coverage.md.j2"
_COLUMNS = {"models": "model", "precision": "dtype", "batch_sizes": "batch_size", "seq_lens": "seq_len"}


def _present(rows: pd.DataFrame, column: str) -> list:
    return sorted({x for x in rows[column].dropna()}) if column in rows and len(rows) else []


@dataclass(frozen=True)
class Coverage:
    """A claim's coverage: `level` 'seed', 'proxy', 'not answerable' or 'not comparable'; conditions by kind."""

    level: str
    holds: list[str] = field(default_factory=list)
    substituted: list[str] = field(default_factory=list)
    lacking: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    def text(self) -> str:
        return wording.macro(WORDS, "text", self, SEED_CONDITIONS)


def scoped(claim: Claim, key: str) -> list[int]:
    """The seed's sizes a claim is about for `key` (batch_sizes, seq_lens): its scope's, else the whole grid's."""
    c = claim.conditions
    return list(getattr(c.scope, key)) or list(getattr(c, key))


def in_scope(frame: pd.DataFrame, claim: Claim) -> pd.DataFrame:
    """The rows of `frame` inside the claim's scope (all of them where it has none or the frame lacks the column)."""
    for key in SIZES:
        wanted = getattr(claim.conditions.scope, key)
        column = _COLUMNS[key]
        if wanted and column in frame:
            frame = frame[frame[column].isin(wanted)]
    return frame


def _seed_lacks(claim: Claim, key: str, missing: set) -> set:
    """Of the seed's sizes missing here, those the seed has no result for either (`seed_lacks`, or too long)."""
    c = claim.conditions
    out = missing & set(getattr(c.seed_lacks, key))
    limits = [getattr(model_registry.MODELS.get(name), "max_positions", None) for name in c.models]  # None: unknown
    if key == "seq_lens" and limits and None not in limits:
        out |= {s for s in missing if s > max(limits)}
    return out


def _texts(claim: Claim, rows: pd.DataFrame, holds: list, subs: list, notes: list) -> None:
    texts, batches = _present(rows, "n_texts"), _present(rows, "batch_size")
    if not (claim.conditions.texts and texts):
        return
    seed = f"{claim.conditions.texts:,}"
    if texts == [claim.conditions.texts]:
        holds.append(f"{seed} texts")
    elif batches and min(texts) / max(batches) >= MIN_BATCHES:
        notes.append(wording.macro(WORDS, "enough", seed, sizes_text(texts), MIN_BATCHES, int(max(batches))))
    else:
        subs.append(f"texts: seed {seed}, here {sizes_text(texts)}")


def coverage(claim: Claim, device: str, rows: pd.DataFrame | None = None) -> Coverage:
    """The claim's conditions on a profile of `device` against the rows our measurement used, where given."""
    c = claim.conditions
    if c.device != "any" and c.device != device:
        return Coverage("not comparable", absent=[f"device: seed {c.hardware}, here {device}"])
    rows = rows if rows is not None else pd.DataFrame()
    holds, subs, lacking, absent, notes = [], [], [], [], [f"hardware: seed {c.hardware}, here {device}"]
    threads = _present(rows, "threads")
    if c.threads and threads and threads != [c.threads]:
        notes.append(f"threads: seed {c.threads}, here {sizes_text(threads)}")
    for key in DEFINING:
        seed, here = (scoped(claim, key) if key in SIZES else getattr(c, key)), _present(rows, _COLUMNS[key])
        label = _LABELS[key]
        show = sizes_text if key in SIZES else (lambda v: ", ".join(map(str, v)))
        seed_text = c.models_text if key == "models" else show(seed)
        if not seed:
            continue
        if not here:
            (absent if key in c.defining else lacking).append(f"{label}: seed {seed_text}, none measured here")
            continue
        common, extra, missing = set(here) & set(seed), set(here) - set(seed), set(seed) - set(here)
        if key in SIZES:
            lacks = _seed_lacks(claim, key, missing)
            missing -= lacks
            if lacks:
                notes.append(wording.macro(WORDS, "no_result", label, show(sorted(lacks))))
        if key in c.defining and (missing if key in SIZES else not common):
            absent.append(f"{label}: seed {seed_text}, here {show(here)}")
            continue
        if common:
            holds.append(f"{label} {show(sorted(common))}")
        if extra:
            subs.append(f"{label}: seed {seed_text}, here {show(sorted(extra))}")
        if missing and key in SIZES:
            lacking.append(f"{label} {show(sorted(missing))}")
    _texts(claim, rows, holds, subs, notes)
    if c.mode:
        notes.append(f"mode: seed {c.mode}")
    subs += claim.substitutes  # a fixed difference in what is compared: it makes every verdict a proxy
    level = "not answerable" if absent else "proxy" if (subs or lacking) else "seed"
    return Coverage(level, holds, subs, lacking, absent, notes, list(claim.caveats))

