"""core/wording.py: the templates' one way of turning data into a page's words."""

import jinja2
import pytest

from studylib.core import wording


@pytest.fixture
def templates(tmp_path, monkeypatch):
    monkeypatch.setattr(wording, "TEMPLATES", tmp_path)
    wording.environment.cache_clear()
    yield tmp_path
    wording.environment.cache_clear()


def test_say_collapses_the_wrapping_and_formats_with_the_number_filters(templates):
    (templates / "s.md.j2").write_text("{{ name }} is\n  {{ s | fmt(lo, hi) }}\nfaster{% if cost %}, at {{ cost }}{% endif %}.\n")
    assert wording.say("s.md.j2", name="ort", s=1.874, lo=1.80, hi=1.95, cost="") == "ort is 1.87× (95% CI 1.80–1.95) faster."


def test_block_keeps_lines_and_html_is_escaped_where_markdown_is_not(templates):
    (templates / "b.html.j2").write_text("<li>{{ x }}</li>\n<li>{{ y }}</li>\n")
    (templates / "b.md.j2").write_text("- {{ x }}\n")
    assert wording.block("b.html.j2", x="a<b", y="c") == "<li>a&lt;b</li>\n<li>c</li>"
    assert wording.block("b.md.j2", x="a<b") == "- a<b"


def test_a_name_the_caller_did_not_pass_is_an_error_not_an_empty_string(templates):
    (templates / "u.md.j2").write_text("{{ missing }} words")
    with pytest.raises(jinja2.UndefinedError):
        wording.say("u.md.j2")


def test_a_macro_of_a_template_is_said_as_prose(templates):
    (templates / "m.md.j2").write_text("{% macro calls(n) %}paid back after\n{{ n | fmt_calls }} calls{% endmacro %}")
    assert wording.macro("m.md.j2", "calls", 1203.4) == "paid back after 1,203 calls"
    assert wording.macro("m.md.j2", "calls", float("inf")) == "paid back after never calls"
