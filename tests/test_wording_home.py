"""Wording has a home (issue 56, item 4): the reader-facing sentences of studies/, report/, claims/ and stats/ are
templates in src/studylib/templates/, not f-strings. A sentence f-string is one with a formatted value and at least
five words of its own text (the values not counted), outside a `raise`: a label such as "{label}: seed {x}, here {y}"
is not a sentence."""

import ast
import re
from pathlib import Path

import studylib

SRC = Path(studylib.__file__).parent
PARTS = ("studies", "report", "claims", "stats")
MOST = 25  # the bound on what may stay


def _words(node: ast.JoinedStr) -> int:
    text = " ".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return len(re.findall(r"[A-Za-z]{2,}", text))


def sentence_fstrings(root: Path = SRC) -> list[str]:
    found = []
    for part in PARTS:
        for path in sorted((root / part).rglob("*.py")):
            tree = ast.parse(path.read_text())
            raised = {id(n) for r in ast.walk(tree) if isinstance(r, ast.Raise) for n in ast.walk(r)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.JoinedStr) and id(node) not in raised and _words(node) >= 5
                        and any(isinstance(v, ast.FormattedValue) for v in node.values)):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_counter_finds_a_sentence_and_skips_an_error(tmp_path):
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "m.py").write_text(
        'def f(x):\n    if x:\n        raise ValueError(f"the value {x} is not allowed here")\n'
        '    return f"ort is {x} faster than eager"\n')
    assert sentence_fstrings(tmp_path) == ["studies/m.py:4"]


def test_at_most_a_few_sentence_fstrings_remain_outside_the_templates():
    found = sentence_fstrings()
    assert len(found) <= MOST, f"{len(found)} sentence f-strings (at most {MOST}): " + ", ".join(found)
