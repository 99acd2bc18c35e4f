"""A rendered page as a reader gets it: no In/Out prompts, no link to files the report does not carry, the seed
articles named, the study's words explained, none of the harness's internal words."""

import re

import nbformat
import pytest

from studylib import render, seeds

# Words of the harness that a reader of a page should never meet (issue 33).
INTERNAL = ("params/", "early pass", "/cache/", "make report", "taken from earlier runs", "environment fingerprint",
            "run_shift_pct")
PROMPTS = re.compile(r"\b(In|Out)\s*(&nbsp;|\s)*\[\s*\d*\s*\]:")


def page_faults(text: str) -> list[str]:
    """What a reader should not see on `text` (a rendered page): prompts and internal words."""
    found = [m.group(0) for m in PROMPTS.finditer(text)]
    return found + [w for w in INTERNAL if w in text]


@pytest.fixture
def page(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · A study\nText."),
                nbformat.v4.new_code_cell("profile = 'smoke'", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("1 + 1", execution_count=3, outputs=[nbformat.v4.new_output(
                    "execute_result", {"text/plain": "2"}, execution_count=3)])]
    src = tmp_path / "01_a.ipynb"
    nbformat.write(nb, src)
    return render.notebook_html(src, tmp_path / "01_a.html").read_text()


def test_a_rendered_page_has_no_prompts_and_no_link_to_missing_files(page):
    assert page_faults(page) == []
    assert "profile = 'smoke'" not in page  # the parameters cell is left out
    assert "../executed/" not in page and 'class="jp-InputPrompt' not in page
    assert "A/A control</dt>" in page and "replicate</dt>" in page and "profile</dt>" in page


def test_every_seed_is_named_with_title_author_and_year_and_linked_where_it_has_an_address(page):
    for seed in seeds.SEEDS.values():
        assert seed.title.split(";")[0].replace("&", "&amp;") in page or seed.title in page
        assert seed.year and seed.author
        if seed.url:
            assert f'href="{seed.url}"' in page
    assert page.count("<li><b>Seed ") == len(seeds.SEEDS)


def test_the_check_finds_prompts_and_internal_words():
    assert page_faults('<div class="jp-InputPrompt">In&nbsp;[3]:</div> see params/cpu.yaml') == [
        "In&nbsp;[3]:", "params/"]
