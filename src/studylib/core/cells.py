"""A stored cell read as a value: the one reading of blanks (None, NaN, pandas' NA) for rows, frames and tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def value(v):
    """A cell's value, None where it is blank (None, NaN, pandas' NA); '' is a value."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def of(row, name: str):
    """`row`'s cell `name` (a dict, a pandas row or an object with that attribute), None where missing or blank."""
    return value(row.get(name) if hasattr(row, "get") else getattr(row, name, None))


def whole(v):
    """A cell's value, a whole float as an int (a pandas column of ints with blanks holds floats), None where blank."""
    v = value(v)
    return int(v) if isinstance(v, float) and v.is_integer() else v


def key(v):
    """A cell as a key two rows match on: None where blank or '', a whole float (numpy's too) as an int."""
    if not present(v) or (isinstance(v, np.floating) and np.isnan(v)):
        return None
    return int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v


def present(v) -> bool:
    """Whether a cell holds a value: not blank and not ''."""
    return value(v) is not None and not (isinstance(v, str) and v == "")


def number(v) -> float:
    """A cell as a float, NaN where it is blank or not a number."""
    try:
        return float(v) if present(v) else math.nan
    except (TypeError, ValueError):
        return math.nan


def text(v) -> str:
    """A cell as a string, '' where it is blank."""
    return str(v) if present(v) else ""
