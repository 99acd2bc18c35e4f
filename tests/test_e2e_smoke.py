"""A smoke profile end to end: papermill runs the notebooks, nbconvert renders them, the index links them.

Checks what a reader would look at — rows in the results table, a figure and findings in the HTML,
the index — not only that files exist. Runs the CLI as `make report` does. Every test runs on `smoke-fast`
(one shape per study, every variant once: `make test`) and, marked `full`, on the whole `smoke` profile
(`make test-full`); what they expect is read from the profile.
"""

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from answer_numbers import answer_numbers_missing
from studylib import run
from studylib.bench import profiles
from studylib.core import paths, study_registry
from studylib.stats.results import ResultsTable
from studylib.studies import STUDIES

pytestmark = pytest.mark.e2e
NB = "01_eager_vs_compiled"
VARIANTS = {"eager", "eager-aa", "compile-default", "compile-reduce-overhead", "compile-max-autotune",
            "eager-channels-last", "compile-default-channels-last", "export-aoti"}
STOPS = {"precision", "budget", "max_rounds"}
NOTEBOOKS = list(STUDIES)
PROFILES = [paths.FAST_SMOKE, pytest.param("smoke", marks=pytest.mark.full)]


def _cli(*args, outputs):
    env = dict(os.environ, STUDYLIB_OUTPUTS=str(outputs))
    return subprocess.run([sys.executable, "-m", "studylib", *args], capture_output=True, text=True, env=env,
                          timeout=900)


def _git_status() -> str:
    return subprocess.run(["git", "-C", str(paths.ROOT), "status", "--porcelain"], capture_output=True,
                          text=True).stdout


@dataclass
class Report:
    """A profile's run and report under a private outputs/."""

    name: str
    outputs: Path

    @property
    def loaded(self) -> profiles.LoadedProfile:
        return profiles.load(self.name)

    def rows(self, notebook: str) -> list[dict]:
        return ResultsTable(self.outputs / self.name / "results" / f"{notebook}.jsonl").rows()

    def html(self, notebook: str = NB) -> str:
        return (self.outputs / self.name / "html" / f"{notebook}.html").read_text()

    def planned(self, notebook: str) -> set[str]:
        """The configuration keys the profile asks of a notebook (what its results table must hold)."""
        return {c.key for c in study_registry.grid(self.loaded, notebook)}

    def section(self, notebook: str):
        return self.loaded.sections[notebook]


@pytest.fixture(scope="module", params=PROFILES)
def smoke(request, tmp_path_factory) -> Report:
    name = request.param
    outputs = tmp_path_factory.mktemp("e2e") / "outputs"
    before = _git_status()
    first = _cli("run", "--profile", name, outputs=outputs)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Traceback" not in first.stderr and "early pass of replicate" not in first.stderr, first.stderr[-3000:]
    report = _cli("report", "--profile", name, outputs=outputs)
    assert report.returncode == 0, report.stderr[-3000:]
    assert _git_status() == before, "a smoke run and report changed files git sees"
    return Report(name, outputs)


def test_results_table_holds_every_configuration(smoke):
    rows = smoke.rows(NB)
    assert sorted(r["config_key"] for r in rows) == sorted(smoke.planned(NB))
    assert {r["variant"] for r in rows} == VARIANTS
    assert {r["model"] for r in rows} == set(smoke.section(NB).models)
    for r in rows:
        assert r["status"] == "ok", r
        assert r["parity_ok"] is True and r["max_abs_diff"] < 1e-3
        assert len(r["samples_s"]) == r["n"] >= smoke.loaded.measure_for(NB).min_rounds
        assert r["ci_low_s"] <= r["median_s"] <= r["ci_high_s"]
        # smoke's shift between whole runs is unknown: no re-run interval, the page says so
        assert r["run_shift_sigma"] is None and r["rerun_low_s"] is None and r["se_log"] > 0
        assert r["first_call_s"] > 0 and set(r["stop_reason"].split(",")) <= STOPS
        assert r["replicates"] == 1 and len(r["sample_round"]) == r["n"]  # study 01: one replicate
        if r["variant"] == "compile-reduce-overhead":
            assert "CUDA graphs need a GPU" in r["notes"]
        if r["variant"] == "export-aoti":  # torch.export + AOTInductor: its three steps, made in this run
            assert [s["step"] for s in r["prepare_steps"]] == ["torch.export", "aoti_compile_and_package", "load"]
            assert not any(s["cached"] for s in r["prepare_steps"])
    assert (smoke.outputs / smoke.name / "results" / f"{NB}.csv").exists()
    env = json.loads((smoke.outputs / smoke.name / "results" / "env.json").read_text())
    assert env["profile"] == smoke.name and env["fingerprint"] == rows[0]["env_fingerprint"]
    # every notebook that ran keeps its own capture time and harness overhead (env.json itself is the last one's)
    assert NB in env["notebooks"] and set(env["notebooks"][NB]) == {"captured_at", "overhead"}


def test_study02_holds_every_variant_on_the_same_weights(smoke):
    rows = smoke.rows("02_torchscript_vs_xla")
    assert sorted(r["config_key"] for r in rows) == sorted(smoke.planned("02_torchscript_vs_xla"))
    section = smoke.section("02_torchscript_vs_xla")
    assert {r["variant"] for r in rows} == {"eager", "eager-aa", *section.variants}
    # export-aoti (a cold C++ compile; smoke-fast leaves it to study 01) runs where the profile's variant_skip lets it,
    # never on the single operations
    assert {r["model"] for r in rows if r["variant"] == "export-aoti"} == (
        {"bert-tiny"} if "export-aoti" in section.variants else set())
    ok = [r for r in rows if r["status"] == "ok"]
    k = smoke.loaded.measure_for("02_torchscript_vs_xla").replicates  # smoke: two processes, pooled
    assert all(r["replicates"] == k and set(r["sample_rep"]) == set(range(k)) for r in ok)
    assert len({r["group_id"] for r in rows if r["seq_len"] == 8 and r["batch_size"] == 1 and r["model"] == "bert-tiny"}) == 1
    assert not list((smoke.outputs / smoke.name / "results" / "02_torchscript_vs_xla.parts").glob("*.json"))
    ok = [r for r in rows if r["status"] == "ok"]
    failed = [r for r in rows if r["status"] != "ok"]
    # GPT-2's attention-mask code cannot be traced by TorchScript: a failure recorded as a row, not dropped.
    assert {(r["model"], r["variant"]) for r in failed} <= {("gpt2-tiny", "torchscript"),
                                                           ("gpt2-tiny", "torchscript-optimized")}
    assert all(r["error"] for r in failed)
    for r in ok:
        assert r["parity_ok"] is True, r
    xla = [r for r in ok if r["variant"] == "tf-xla"]
    assert len(xla) == len([k for k in smoke.planned("02_torchscript_vs_xla") if "|tf-xla|" in k])
    assert all(r["compilations"] == 1 and r["recompilations"] == 0 for r in xla)
    html = smoke.html("02_torchscript_vs_xla")
    assert "<strong>XLA over tf.function</strong>: " in html  # the verdict table's line
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', html)) >= 3
    alts = re.findall(r'<img [^>]*alt="([^"]*)"', html)  # every figure says what it shows (plots.alt_text)
    assert len(alts) == html.count("<img ") and all(" against " in a or "panels" in a for a in alts), alts
    assert "Beside the published claims" in html and "TorchScript-traced model runs inference 20% faster" in html
    # a claim about TorchScript names where its successor stands at the claim's shapes (bert-tiny batch 1 here)
    if "export-aoti" in section.variants:
        assert "its successor export-aoti against torchscript at these shapes: " in html


def test_study03_holds_every_runtime_and_int8_agreement(smoke):
    rows = smoke.rows("03_onnx_batching")
    section = smoke.section("03_onnx_batching")
    assert sorted(r["config_key"] for r in rows) == sorted(smoke.planned("03_onnx_batching"))
    trt = [r for r in rows if r["variant"] == "ort-tensorrt"]  # no GPU here: skipped rows, kept and shown
    assert len(trt) == len(section.batch_sizes)
    assert all(r["status"] == "skipped" and "needs a CUDA GPU" in r["error"] for r in trt)
    rows = [r for r in rows if r["variant"] != "ort-tensorrt"]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    for r in rows:
        assert r["n_texts"] == section.corpus.n_texts and r["real_tokens"] > 64 and r["parity_ok"] is True
        assert 0.9 <= r["label_agreement"] <= 1.0
    cached = [r for r in rows if r["variant"] == "ort" and r["batch_size"] == max(section.batch_sizes)]
    assert [(s["step"], s["cached"]) for s in cached[0]["prepare_steps"]] == [("export", True)]  # exported once
    # ... and its one-time cost is still the cold one: the export counts at what it took the configuration that made it
    export_s = cached[0]["prepare_steps"][0]["seconds"]
    assert cached[0]["cold_prepare_s"] == pytest.approx(cached[0]["prepare_s"] + export_s)
    # the successors of two deprecated paths ran beside them: the dynamo exporter's graph, torchao's int8
    dynamo = [r for r in rows if r["variant"] == "ort-dynamo"]
    assert len(dynamo) == len(section.batch_sizes) and all(r["prepare_steps"][0]["nodes"] > 0 for r in dynamo)
    assert "dynamo exporter (torch.onnx.export's default here: dynamo)" in dynamo[0]["notes"]
    assert all("Linear layers int8 (torchao " in r["notes"] for r in rows if r["variant"] == "torchao-int8")
    assert list((smoke.outputs / smoke.name / "cache" / "onnx").iterdir())
    html = smoke.html("03_onnx_batching")
    assert "ort-int8: predicted labels agree with eager fp32 PyTorch on" in html
    assert "torchao-int8: predicted labels agree with eager fp32 PyTorch on" in html
    assert "<strong>dynamo ONNX export over the TorchScript export</strong>: " in html  # the verdict table's lines
    assert "<strong>torchao int8 over torch.ao int8</strong>: " in html
    # a claim about the TorchScript-based export names where its successor stands at the claim's shapes
    assert "its successor ort-dynamo against ort at these shapes: " in html
    assert "Beside the published claims" in html
    assert "did not run (marked in the figures): ort-tensorrt" in html
    assert "GPU code paths not exercised by these results</strong> (these results were measured on the CPU)" in html
    assert "ONNX Runtime CUDA provider" in html


def test_study04_holds_every_strategy_with_exact_padding(smoke):
    rows = smoke.rows("04_sorted_length_batching")
    assert sorted(r["config_key"] for r in rows) == sorted(smoke.planned("04_sorted_length_batching"))
    assert all(r["status"] == "ok" for r in rows)
    assert len({r["group_id"] for r in rows}) == 1  # every strategy and batch size timed in the same rounds
    by = {(r["strategy"], r["batch_size"], r["variant"]): r for r in rows}
    assert by[("pad-to-max", 8, "eager")]["computed_tokens"] == 64 * 128
    assert by[("sorted", 8, "eager")]["padding_waste"] < by[("unsorted", 8, "eager")]["padding_waste"]
    assert all(r["padding_waste"] == 0 for (s, b, _), r in by.items() if b == 1 and s != "pad-to-max")
    assert max(r["batched_vs_unbatched_max_diff"] for r in rows) < 1e-4
    html = smoke.html("04_sorted_length_batching")
    assert "sorted over unsorted</strong>" in html and "Padding waste by strategy" in html


def test_study05_runs_each_keras_backend_in_a_process_of_its_own(smoke):
    rows = smoke.rows("05_keras_backends")
    assert sorted(r["config_key"] for r in rows) == sorted(smoke.planned("05_keras_backends"))
    models = smoke.section("05_keras_backends").models
    not_ok = {(r["variant"], r["model"]): r["status"] for r in rows if r["status"] != "ok"}
    # no Keras 2 build of the text encoder
    assert not_ok == ({("keras2-tensorflow", "bert-tiny"): "skipped"} if "bert-tiny" in models else {})
    assert "resnet-50" in models  # the model Keras 2 runs
    keras = [r for r in rows if r["variant"].startswith("keras")]
    assert {r["backend"] for r in keras} == {"torch", "tensorflow", "jax"}
    assert all(r["variant"].startswith(("keras2", f"keras-{r['backend']}")) for r in keras)
    # native eager and its A/A copy in every backend's process; rounds shared only within a process
    eager = [r for r in rows if r["variant"] == "eager"]
    assert sorted(r["backend"] for r in eager) == sorted(["torch", "tensorflow", "jax"] * len(models))
    assert all(r["parity_ok"] for r in rows if r["status"] == "ok")
    groups = {}
    for r in rows:
        groups.setdefault(r["group_id"], set()).add(r["backend"])
    assert all(len(b) == 1 for b in groups.values()) and len(groups) == 3 * len(models)
    html = smoke.html("05_keras_backends")
    assert "<strong>Fastest Keras 3 backend</strong> per shape" in html and "Keras 3 over Keras 2</strong>" in html
    assert "002-no-best-backend" in html and "Keras 3 vs native PyTorch</strong>" in html


@pytest.mark.parametrize("notebook", [*NOTEBOOKS, paths.SUMMARY_NOTEBOOK])
def test_executed_notebook_has_no_errors(smoke, notebook):
    where = "summary" if notebook == paths.SUMMARY_NOTEBOOK else smoke.name
    nb = nbformat.read(smoke.outputs / where / "executed" / f"{notebook}.ipynb", as_version=4)
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    assert not [o for o in outs if o.output_type == "stream" and o.name == "stderr"]


def test_html_shows_figures_findings_and_claims(smoke):
    html = smoke.html(NB)
    shapes = len(smoke.section(NB).shapes())
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', html)) >= 2  # embedded: readable offline
    assert not re.search(r'<script[^>]+src="https?:', html)  # no CDN script to wait for offline
    assert re.search(r"<h2[^>]*>Findings", html)
    assert "<strong>torch.compile (default) over eager</strong>: " in html  # the verdict table's line
    assert "Parity with eager: largest max-abs difference" in html
    assert re.search(r"<strong>A/A control</strong> \(eager-aa, .*called different from eager in \d+ of "
                     rf"{shapes} shapes", html)
    assert re.search(r"Drift: (no configuration|\d+ of \d+ configurations)", html)
    assert "Beside the published claims" in html and "reduce-overhead" in html and "verdict" in html
    assert "harness overhead per call" in html
    assert "Traceback" not in html


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_each_page_opens_with_its_answer_and_shows_no_code_or_parameters_cell(smoke, notebook):
    html = smoke.html(notebook)
    body = html.split("<body", 1)[1]
    # the Answer first (on the first screen), the decision table under it, "How sure are we" (the statistics) at the end
    assert body.index('class="answer"') < body.index('class="decisions"') < body.index("What ran")
    answer = body.split('class="answer"', 1)[1].split("</div>", 1)[0]
    prose = answer.split("<ul>", 1)[1].split("</ul>", 1)[0]
    assert "Pick: " in prose and "Ties are within ±5%" in prose and "Measured on " in answer
    box = re.sub(r"<[^>]+>", " ", answer.split(">", 1)[1])
    assert len(box.split()) <= 150 and len(re.findall(r"\w+", box)) <= 150  # the whole box, by any count
    # a heading closes the Answer: what follows it (why, a GPU, what did not run) is not read as part of it
    after = body.split('class="answer"', 1)[1].split("</div>", 1)[1]
    assert re.match(r"\s*<h2>Decision table</h2>", after)  # the table the Answer reads, then the notes
    after = after.split('class="decisions"', 1)[1].split("</table>", 1)[1]
    assert re.match(r"\s*(</details>)?\s*<p[^>]*>Each cell:[^<]*</p>\s*<h3>(Which batch size|Why, and where this answer holds)",
                    after)
    assert "<strong>On a GPU.</strong>" in after.split("About this study", 1)[0]
    sure = body[body.index("How sure are we"):]
    assert "A/A control" in sure and "Benjamini and Yekutieli" in sure and 'class="dataframe verdicts"' in sure
    for bad in (">nan<", ">None<", "&lt;NA&gt;", ">NaN<", " 1 calls"):
        assert bad not in body, bad
    # every code input is folded in a closed <details>; the parameters cells are not rendered at all
    assert body.count('class="jp-CodeMirrorEditor') == body.count('<details class="study-code">') > 0
    assert "<details class=\"study-code\" open" not in body
    assert "Parameters: `studylib run" not in body and "injected-parameters" not in body
    assert ">batch_sizes<" in body and ">parameter<" in body  # what ran, as a table
    assert "../executed/" not in body  # the reference carries no executed notebooks: no link to one


def test_no_page_or_results_file_names_a_path_of_the_machine(smoke):
    outputs = smoke.outputs
    files = [*outputs.rglob("*.html"), *outputs.glob("*/results/*.jsonl"), *outputs.glob("*/results/*.json"),
             *outputs.glob("*/run.json")]
    assert len(files) >= 2 * len(NOTEBOOKS)
    leaks = [f.name for f in files for path in (str(outputs.parent), str(paths.ROOT)) if path in f.read_text()]
    assert leaks == []


def test_index_links_the_notebook_with_status_and_environment(smoke):
    outputs = smoke.outputs
    index = (outputs / "index.html").read_text()
    for notebook in NOTEBOOKS:
        assert f'href="{smoke.name}/html/{notebook}.html"' in index
    rows = re.findall(rf'<tr class="ok"><td><a href="{smoke.name}/html/.*?</tr>', index)
    assert len(rows) == len(NOTEBOOKS) and all("Pick: " in r for r in rows)  # each study's headline: its pick
    assert "Machine:" in index
    assert index.count(">OK<") == len(NOTEBOOKS) + 1  # each notebook of the profile, and the summary
    assert "CPUs" in index and "torch" in index
    manifest = json.loads((outputs / smoke.name / "run.json").read_text())
    assert manifest[NB]["status"] == "ok" and manifest[NB]["duration_s"] > 0
    # replicate 0 of each notebook with two replicates ran in an early pass, before any notebook did
    two = [nb for nb in NOTEBOOKS if smoke.loaded.measure_for(nb).replicates == 2]  # smoke-fast: none
    assert two or smoke.name == paths.FAST_SMOKE
    assert all(manifest[nb]["early_replicates_s"] > 0 for nb in two)
    assert "early_replicates_s" not in manifest[NB]
    assert index.count(" s of it replicates measured before the page ran)") == len(two)


def test_summary_sets_the_profile_beside_the_seed_claims(smoke):
    outputs = smoke.outputs
    html = (outputs / "summary" / "html" / f"{paths.SUMMARY_NOTEBOOK}.html").read_text()
    assert "Headline: the seeds" in html and "Headline speed-ups across machines" in html
    assert "torch.compile (default) over eager" in html and "sorted over unsorted batches" in html
    assert "TorchScript-traced model runs inference 20% faster" in html  # a seed 000 claim, from the registry
    assert re.search(rf"Claims on {smoke.name}: \d+ — \d+ judged under the seed(&#x27;|')s conditions",
                     html)  # agree/disagree counted under the seed's only
    assert re.search(r"\d+ proxy verdicts on substituted models or sizes", html)
    assert f"Claims on {smoke.name}:" in html and "Only one profile has results here" in html
    assert "ONNX Runtime TensorRT provider" in html  # the GPU coverage table
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', html)) >= 1
    index = (outputs / "index.html").read_text()
    assert f'href="summary/html/{paths.SUMMARY_NOTEBOOK}.html"' in index and "Across machines" in index
    assert index.index("What to use on this machine") < index.index('href="summary/html')  # the answer comes first


def test_the_report_reads_in_a_browser(smoke):
    """Headless Chromium opens the index and every page it links, offline: figures load, no error output."""
    import browser

    outputs = smoke.outputs
    pages = browser.check_report(outputs / "index.html", outputs / "screenshots")
    assert not [p for page in pages for p in page.problems()], [page.problems() for page in pages]
    assert len(pages) == 1 + len(NOTEBOOKS) + 1  # the index, each notebook, the summary
    assert all(page.n_images >= 1 for page in pages[1:])
    assert len(list((outputs / "screenshots").glob("*.png"))) == len(pages)


def test_run_all_on_the_committed_notebook_reuses_the_measurements(smoke, monkeypatch):
    """What a reader does in JupyterLab: open the notebook and run all cells with the defaults (= smoke)."""
    from nbclient import NotebookClient

    if smoke.name != "smoke":
        pytest.skip("the committed notebook's defaults are the smoke profile's: make test-full runs this")
    outputs = smoke.outputs
    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(outputs))
    nb = nbformat.read(paths.notebook_path(NB), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name=run.kernel_name(),
                   resources={"metadata": {"path": str(paths.NOTEBOOKS_DIR)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "0 configurations measured in this run (0 groups" in text and f"{len(smoke.planned(NB))} reused from earlier runs" in text


def test_a_failing_notebook_is_marked_in_the_index(tmp_path, outputs, monkeypatch):
    nb = nbformat.read(paths.notebook_path(NB), as_version=4)
    params_at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(params_at + 1, nbformat.v4.new_code_cell('raise RuntimeError("boom")'))
    broken = tmp_path / "notebooks"
    broken.mkdir()
    for other in [*NOTEBOOKS[1:], paths.SUMMARY_NOTEBOOK]:  # the profile names them all; only the broken one runs
        (broken / f"{other}.ipynb").write_bytes(paths.notebook_path(other).read_bytes())
    nbformat.write(nb, broken / f"{NB}.ipynb")
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", broken)

    assert run.run("smoke", [NB]) == 1
    entry = json.loads((outputs / "smoke" / "run.json").read_text())[NB]
    assert entry["status"] == "failed" and entry["error"] == "RuntimeError: boom" and entry["failed_cell"]

    from studylib.report.render import report

    index = report("smoke").read_text()
    assert ">FAILED<" in index and "RuntimeError: boom" in index
    assert (outputs / "smoke" / "html" / f"{NB}.html").exists()  # the failed notebook is still readable


def test_every_number_in_each_answer_box_is_in_the_page_tables(smoke):
    """Each study page's Answer box: every speed-up with its CI, every bare ratio and every one-time cost it states is
    printed, with the same rounding, in a table of the page outside the box."""
    for notebook in NOTEBOOKS:
        page = smoke.html(notebook)
        assert page.count('<div class="answer"') == 1, notebook
        missing, checked = answer_numbers_missing(page)
        assert checked > 0, f"{notebook}: its Answer box states no number"
        assert not missing, f"{notebook}: Answer numbers not in its tables: {missing}"


def test_the_index_opens_with_what_to_use_on_this_machine(smoke):
    page = (smoke.outputs / "index.html").read_text()
    body = page[page.index("<body>"):]
    assert body.index("What to use on this machine") < body.index("The studies")
    table = body[body.index('class="dataframe what-to-use"'):]
    table = table[:table.index("</table>")]
    for study in ("01", "02", "03", "04", "05"):
        assert f"<td>{study}</td>" in table, study
    assert "<th>decision</th>" in table and "% of" not in body
    assert "measured GEMM roof GFLOP/s" in body and "says nothing about a GPU" in body


def test_no_page_shows_a_prompt_or_an_internal_word(smoke):
    """Every rendered page and the index read in a reader's words: no In/Out prompts, none of the harness's words
    (params/…, early passes, cache paths, make commands, run_shift …), no link to the executed notebooks."""
    from test_pages import page_faults

    outputs = smoke.outputs
    pages = [outputs / "index.html", *outputs.glob("*/html/*.html")]
    assert len(pages) == 1 + len(NOTEBOOKS) + 1
    faults = {p.name: page_faults(p.read_text()) for p in pages}
    assert not any(faults.values()), faults
    assert not any("../executed/" in p.read_text() for p in pages)
