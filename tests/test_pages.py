"""A rendered page as a reader gets it: no In/Out prompts, no link to files the report does not carry, the seed
articles named, the study's words explained, none of the harness's internal words."""

import re

import nbformat
import pandas as pd
import pytest

from studylib.report import render, seeds, summary

# Words of the harness that a reader of a page should never meet (issue 33).
INTERNAL = ("params/", "early pass", "/cache/", "make report", "taken from earlier runs", "environment fingerprint",
            "run_shift_pct", "run_shift_sigma", ".verdicts.csv", "claims.yaml", "src/studylib")
PROMPTS = re.compile(r"\b(In|Out)\s*(&nbsp;|\s)*\[\s*\d*\s*\]:")


CODE = re.compile(r'<details class="study-code">.*?</details>', re.S)


def page_faults(text: str) -> list[str]:
    """What a reader should not see on `text` (a rendered page): prompts, and internal words outside the code
    folded under "code" markers (the code names the library's parameters as they are)."""
    found = [m.group(0) for m in PROMPTS.finditer(text)]
    prose = CODE.sub("", text)
    return found + [w for w in INTERNAL if w in prose]


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


def test_the_summary_answers_first_and_its_verdict_matrix_is_compact(tmp_path, monkeypatch):
    from studylib.studies import STUDIES

    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(tmp_path))
    (tmp_path / "cpu" / "html").mkdir(parents=True)
    (tmp_path / "cpu" / "html" / "02_torchscript_vs_xla.html").write_text("page")
    claims = pd.DataFrame([
        {"profile": "cpu", "study": "02", "id": "000-cpu-tf-slower", "claim": "On CPU, TF is slower.",
         "judgement": "does not agree", "verdict": "does not agree: the direction differs (partly comparable)",
         "comparable?": "partly: threads"},
        {"profile": "cpu", "study": "02", "id": "000-gpu-tf-faster", "claim": "On GPU, TF is faster.",
         "judgement": "not comparable on this profile",
         "verdict": "not comparable on this profile (GPU claim); tested by gpu-a100", "comparable?": "no: a GPU claim"},
    ])
    opening = summary.opening(["cpu"])
    assert f"the {len(STUDIES)} studies" in opening and all(nb[:2] + " · " in opening for nb in STUDIES)
    answer = summary.answer(["cpu"], claims)
    assert answer.startswith("**Answer.** What to use, machine by machine") and "Only `cpu` has results here" in answer
    assert "- **cpu**" in answer and "agree" not in answer  # picks, no claim tallies: those are claim_totals'
    assert summary.claim_totals(["cpu"], claims).startswith("- ") and "do not agree" in summary.claim_totals(["cpu"], claims)
    [gpu] = [line for line in answer.splitlines() if "`gpu-a100`" in line]  # who would judge what cpu cannot
    assert "000-gpu-tf-faster" in gpu or "seeds 000" in gpu
    matrix = summary.verdict_matrix(claims)
    assert matrix.count('<a href="../../cpu/html/02_torchscript_vs_xla.html">') == 2
    assert ">does not agree</a>" in matrix and ">not comparable here</a>" in matrix
    assert "(GPU claim); tested by gpu-a100" in matrix.split("title=")[2]  # in full on hover, not cut in the cell


def test_no_committed_reference_page_shows_a_prompt_or_an_internal_word():
    from studylib.core import paths

    pages = sorted(paths.reference_root().rglob("*.html"))
    assert len(pages) >= 7  # the index, five studies and the summary
    faults = {p.name: page_faults(p.read_text()) for p in pages}
    assert not any(faults.values()), faults


def test_the_committed_index_answers_a_workload_several_studies_measured_in_one_row():
    """ResNet-50 and BERT-base fp32 batch 1 ran in studies 01 and 05: one row each names the fastest option found."""
    from studylib.core import paths

    index = (paths.reference_root() / "index.html").read_text()
    across = index[index.index("One workload, several studies"):]
    across = across[:across.index("</table>")]
    for workload in ("resnet-50 fp32 batch 1 224px", "bert-base fp32 batch 1 seq 128"):
        assert across.count(f"<td>{workload}</td>") == 1, workload
    assert "(study 05)" in across and "01 eager: " in across and "05 eager (torch process): " in across
    assert index.index("One workload, several studies") < index.index('class="dataframe what-to-use"')  # read first
