"""The variant and profile names pages use, in plain words (a variant's gloss is its registration's)."""

from __future__ import annotations

from .. import runtimes
from ..core.wording import block

WORDS = {
    "<variant>-aa": "an A/A copy: the variant prepared again on its own copy of the model, timed like any variant",
    "sorted, bucketed, pad-to-max, unsorted": "how study 04 batches texts: by length, within buckets of batches, "
                                               "every text padded to the maximum, or in the given order",
    "smoke, smoke-fast": "tiny profiles that check the pipeline in minutes; their numbers are not real models'",
    "(jax process)": "measured in the process of that Keras backend (backends run in processes of their own)",
}


def variants() -> dict[str, str]:
    """Every registered variant's gloss, in registration order."""
    return {r.name: r.gloss for r in runtimes.declared()}


def html_list() -> str:
    """The glossary's entries for a page's "Words used on these pages"."""
    return block("glossary/words.html", variants=variants(), words=WORDS)
