"""A page's words: Jinja2 templates (numbers.py's filters, strict); `say` collapses whitespace, `block` keeps lines."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import jinja2

from . import numbers

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
FILTERS = {name: getattr(numbers, name) for name in ("fmt", "fmt_alone", "fmt_ci", "fmt_span", "fmt_range",
                                                     "fmt_factor", "fmt_calls", "fmt_ms", "fmt_seconds", "fmt_level")}


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=lambda name: name is not None and ".html" in name, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=False)
    env.filters.update(FILTERS)
    return env


def block(name: str, /, **data) -> str:
    """The template `name` (a path under templates/) rendered with `data`, lines kept, ends stripped."""
    return environment().get_template(name).render(**data).strip()


def say(name: str, /, **data) -> str:
    """The template `name` rendered with `data` as one run of prose: every whitespace run becomes one space."""
    return re.sub(r"\s+", " ", block(name, **data))


@cache
def _module(env: jinja2.Environment, name: str):
    """The template `name` as a module of macros, built once per name (and environment: tests swap it)."""
    return env.get_template(name).make_module()


def macro(name: str, macro_name: str, /, *args, **kwargs) -> str:
    """One macro of the template `name` called with the arguments, as prose (`say`'s whitespace rule)."""
    return re.sub(r"\s+", " ", str(getattr(_module(environment(), name), macro_name)(*args, **kwargs))).strip()
