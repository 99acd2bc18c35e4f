"""One colour per variant, strategy, backend and profile for the whole report (docs/method.md, "Pages")."""

from __future__ import annotations

import functools
import zlib

import seaborn as sns

from .. import runtimes
from ..core import paths
from ..core.config import AA, is_aa

BASELINE = "#222222"
NOISE = "0.55"  # the A/A controls (every `<variant>-aa`): their line in latency figures, its band in speed-up figures

# Study 04's batching strategies; 'unsorted' is its baseline.
STRATEGIES = ("sorted", "bucketed", "pad-to-max")
# Study 05's backend processes, each the middle shade of its Keras family.
BACKENDS = {"torch": "Reds", "tensorflow": "YlOrBr", "jax": "BuPu"}
# Markers for the backend process a label names ("eager @jax"): one colour per variant, one marker per process.
BACKEND_MARKERS = {"torch": "o", "tensorflow": "s", "jax": "D"}


def _table() -> dict[str, tuple]:
    colours: dict[str, tuple] = {"eager": sns.color_palette([BASELINE])[0], "unsorted": sns.color_palette([BASELINE])[0],
                                 AA: sns.color_palette([NOISE])[0]}
    families: dict[str, list[str]] = {}
    for runtime in runtimes.declared():
        if runtime.colours is not None:
            families.setdefault(runtime.colours, []).append(runtime.name)
    for name, members in families.items():
        shades = sns.color_palette(name, len(members) + 3)[3:]  # darker shades go to later names
        colours.update(zip(members, shades))
    colours.update(zip(STRATEGIES, sns.color_palette("colorblind")[0:3]))
    colours.update({b: sns.color_palette(p, 5)[3] for b, p in BACKENDS.items()})
    return colours


PALETTE = _table()
_SPARE = sns.color_palette("husl", 16)


def colour(name) -> tuple:
    """The report's colour for a name ('variant @backend' takes the variant's; an A/A copy the noise grey)."""
    name = str(name).split(" @")[0]
    if name in PALETTE:
        return PALETTE[name]
    if is_aa(name):
        return PALETTE[AA]
    if name in profile_colours():
        return profile_colours()[name]
    return _SPARE[zlib.crc32(name.encode()) % len(_SPARE)]


def marker(name, default: str = "o") -> str:
    """The marker of the backend process a 'variant @backend' label names; `default` otherwise."""
    _, _, backend = str(name).partition(" @")
    return BACKEND_MARKERS.get(backend, default)


@functools.cache
def profile_colours() -> dict[str, tuple]:
    """One colour per profile under params/, in name order, so a profile keeps its colour as others are added."""
    names = paths.known_profiles()
    return dict(zip(names, sns.color_palette("colorblind", len(names))))
