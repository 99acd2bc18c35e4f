"""The one way a page writes speed-ups, ratios, CIs, ranges and calls: digits follow the CI (docs/method.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence

TIGHT, WIDE = 0.005, 0.5  # CI half-widths (on the ratio) below which 3 decimals, above which 1, are shown
PLAIN = 2  # decimals of a ratio without a CI


def _finite(*values) -> bool:
    try:
        return all(v is not None and math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError):
        return False


def _num(value: float, d: int) -> str:
    return f"{value:,.{d}f}"


def decimals(ci_low: float | None, ci_high: float | None) -> int:
    """The decimals a 95% CI supports: 3 for a half-width under TIGHT, 1 above WIDE, else 2 (also without a CI)."""
    if not _finite(ci_low, ci_high):
        return PLAIN
    half = abs(float(ci_high) - float(ci_low)) / 2
    return 3 if half < TIGHT else 1 if half > WIDE else 2


def fmt(ratio: float, ci_low: float | None = None, ci_high: float | None = None, *, unit: str = "×",
        brief: bool = False, digits: int | None = None, level: float | None = None) -> str:
    """'1.87× (95% CI 1.80–1.95)'; `brief` '1.87× (1.80–1.95)'; '1.87×' without a finite CI; `digits` fixed."""
    d = decimals(ci_low, ci_high) if digits is None else digits
    head = _num(ratio, d) + unit
    if not _finite(ci_low, ci_high):
        return head
    return f"{head} ({'' if brief else fmt_level(level) + ' CI '}{_num(ci_low, d)}–{_num(ci_high, d)})"


def fmt_level(level: float | None = None) -> str:
    """A confidence level: '95%' (also where none is given), '99.2%', '97.3%'."""
    return f"{100 * (level if _finite(level) else 0.95):.3g}%"


def fmt_alone(ratio: float, ci_low: float | None = None, ci_high: float | None = None) -> str:
    """The ratio alone at the decimals of its CI ('1.87×'), where the sentence does not print the CI."""
    return _num(ratio, decimals(ci_low, ci_high)) + "×"


def fmt_ci(ci_low: float, ci_high: float, *, unit: str = "×") -> str:
    """A CI alone, at the decimals of its half-width: '1.80–1.95×'."""
    d = decimals(ci_low, ci_high)
    return f"{_num(ci_low, d)}–{_num(ci_high, d)}{unit}"


def _end(value) -> str:
    """One end of a span: a ratio (PLAIN decimals) or a (ratio, ci_low, ci_high) triple (its CI's decimals)."""
    if isinstance(value, Sequence):
        ratio, lo, hi = value
        return _num(ratio, decimals(lo, hi))
    return _num(value, PLAIN)


def fmt_span(low, high, *, unit: str = "×") -> str:
    """A range over shapes: '0.93–0.99×', or '1.20×' where both ends print alike; ends are ratios or triples."""
    a, b = _end(low), _end(high)
    return f"{a}{unit}" if a == b else f"{a}–{b}{unit}"


def fmt_range(low: float, high: float, spec, unit: str = "", *, collapse: bool = True) -> str:
    """Any other range or CI in one spec ('.1%': '1.2%–3.4%') or formatter (fmt_seconds); one number where alike."""
    a, b = (spec(v) if callable(spec) else format(v, spec) for v in (low, high))
    return f"{a}{unit}" if collapse and a == b else f"{a}–{b}{unit}"


def fmt_factor(factor: float) -> str:
    """A factor given, not measured (a threshold, an axis tick), to 3 significant figures: '1.5×', '10×', '0.125×'."""
    return f"{factor:.3g}×"


def fmt_calls(n: float) -> str:
    """Calls to pay a one-time cost back: '1,203', or 'never' where the candidate saves nothing."""
    return f"{n:,.0f}" if _finite(n) else "never"


def fmt_ms(ms: float | None, missing: str = "—") -> str:
    """Milliseconds to three significant figures: '8.26 ms', '137 ms', '1,131 ms'; `missing` where not finite."""
    if not _finite(ms):
        return missing
    return f"{ms:,.0f} ms" if abs(float(ms)) >= 100 else f"{float(ms):.3g} ms"


def fmt_seconds(s: float | None, missing: str = "—") -> str:
    """A one-time cost or a duration: '14.2 s' from a second up, '340 ms' below; `missing` where not finite."""
    if not _finite(s):
        return missing
    return f"{s:.1f} s" if s >= 1 else f"{s * 1e3:.0f} ms"
