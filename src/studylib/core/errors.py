"""An error as rows, notes and pages record it: 'ExceptionType: the first line of its message', in one line."""

from __future__ import annotations


def first_line(error: BaseException | str, cut: int = 300) -> str:
    """The first non-blank line of an error's message (or of a text), stripped, at most `cut` characters; '' if none."""
    return next((s for line in str(error).splitlines() if (s := line.strip())), "")[:cut]


def said(exc: BaseException, cut: int = 300) -> str:
    """'ExceptionType: first line of the message', the whole at most `cut` characters."""
    return f"{type(exc).__name__}: {first_line(exc, cut)}"[:cut]
