"""One verdict per comparison, decided in one place, feeds every page element that states it (issue 45, item 6).

tests/test_layers.py checks the layering by names (imports, sizes, formats); this checks it by behaviour. For each
study, a small fake results table (stored and read back as a run stores it) gives a page: the decision table, the
Answer, the findings (the verdict lines, then the study's own), "How sure are we", "Which batch size", the successor
line under the Answer, the claims, the index's headline and "What to use", and the summary's headline. The same page
is built again from a doctored verdict table: the one the run decided (StudyRun._decide) with one comparison's
decision flipped (faster ↔ slower) and every number left as it was, saved where the run saves it and handed to
`analyse` as the run hands it; nothing else is patched, so an element that decided for itself (or computed the table
again from the rows) would keep the real decision. Every element that states that comparison's decision must change
with it: one that does not decides for itself, and the test names it. Elements known to decide for themselves are
marked xfail (strict), with where they do it.
"""

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from conftest import stored_row
from studylib import study
from studylib.core import paths
from studylib.core.files import write_json_atomic
from studylib.machine import limits
from studylib.report import answer, decisions, prose, render, summary
from studylib.stats import verdicts
from studylib.stats.results import ResultsTable
from studylib.studies import STUDIES

PROFILE = "cpu"
ROUNDS = 30
NB01, NB02, NB03, NB04, NB05 = ("01_eager_vs_compiled", "02_torchscript_vs_xla", "03_onnx_batching",
                                "04_sorted_length_batching", "05_keras_backends")
NB07 = "07_text_generation"
# The machine's limits as a run measures them (as tests/test_roofline.py's): with them the analyses place every row on
# the roofline, as on a real page.
PEAKS = {"method": limits.METHOD, "device": "cpu", "threads": 2, "seconds": 1.0, "measured_at": "now",
         "matmul": {"fp32": {"gflops": 100.0, "ci_low": 95.0, "ci_high": 105.0, "n": 10, "size": 1024,
                             "kernel": "torch.mm"}},
         "bandwidth": {"gbs": 10.0, "ci_low": 9.0, "ci_high": 11.0, "n": 10, "bytes": 1, "kernel": "triad"}}
# The doctored decision: the other direction, numbers untouched.
FLIP = {"faster": "slower", "slower": "faster", "equal": "slower", "undecided": "faster"}
# Words a finding or a claim states a decision with (verdicts.DECISIONS, prose's "no gain", verdicts.SUCCESSOR_WORDS).
DECISION_WORDS = re.compile(r"\b(faster|slower|equal|undecided|no gain|beats|matches it|falls behind)\b")


# --- fake results ----------------------------------------------------------------------------------------------------


def _row(nb: str, variant: str, ms: float, rng, *, model="bert-tiny", batch=1, seq=16, strategy=None, backend=None,
         texts=None, **values) -> dict:
    """One configuration as the results table stores it (conftest.stored_row: every column): `ms` milliseconds per call
    over ROUNDS rounds with 0.4% noise, no one-time cost, its work counted (so the roofline places it)."""
    shape = {"study": nb, "profile": PROFILE, "model": model, "variant": variant, "dtype": "fp32", "batch_size": batch,
             "device": "cpu", "threads": 2, "seq_len": seq, "strategy": strategy, "backend": backend, "task": "text",
             "n_texts": texts}
    key = "|".join(str(v) for v in (variant, model, batch, seq, strategy, backend) if v is not None)
    group = "|".join(str(v) for v in (model, batch, seq, backend) if v is not None)  # a group shares its rounds
    samples = [float(s) for s in ms / 1e3 * rng.normal(1.0, 0.004, ROUNDS)]
    median = float(np.median(samples))
    return stored_row(key, **shape, group_id=group, n=ROUNDS, median_s=median, ci_run_low_s=median * 0.998,
                      ci_run_high_s=median * 1.002, first_call_s=median, prepare_s=0.0, samples_s=samples,
                      sample_rep=[0] * ROUNDS, sample_round=list(range(ROUNDS)), cv=0.004, stop_reason="precision",
                      max_abs_diff=1e-7, parity_tol=1e-3, flops_per_call=10**9, bytes_per_call=10**7,
                      throughput_samples_s=(texts or batch) / median, **values)


def _pass(nb: str, variant: str, ms: float, rng, *, batch: int, strategy="unsorted", waste=0.3, **values) -> dict:
    """A data-set study's row: one timed pass over 100 texts."""
    tokens = int(10_000 * (1 + waste))
    return _row(nb, variant, ms, rng, model="m", batch=batch, seq=None, strategy=strategy, texts=100,
                padding_waste=waste, real_tokens=10_000, computed_tokens=tokens, n_batches=-(-100 // batch),
                throughput_tokens_s=10_000 / (ms / 1e3), batched_vs_unbatched_max_diff=1e-7,
                label_agreement=0.97 if "int8" in variant else 1.0, **values)


def _study01(rng) -> list[dict]:
    """torch.compile 1.43× eager at two batch sizes."""
    return [_row(NB01, v, 10.0 * f * b, rng, batch=b) for b in (1, 4)
            for v, f in (("eager", 1.0), ("eager-aa", 1.0), ("compile-default", 0.7))]


def _study02(rng, successor: bool, tf: bool = False) -> list[dict]:
    """TorchScript 1.25× eager on four shapes; with `successor`, torch.export + AOTInductor 1.5× TorchScript; with
    `tf`, tf.function 1.6× eager."""
    variants = ([("eager", 1.0), ("eager-aa", 1.0), ("torchscript", 0.8)] + [("export-aoti", 0.8 / 1.5)] * successor
                + [("tf-function", 0.625)] * tf)
    return [_row(NB02, v, 2.0 * f * b * s / 8, rng, batch=b, seq=s) for b in (1, 4) for s in (8, 64)
            for v, f in variants]


def _study03(rng, successor: bool) -> list[dict]:
    """ONNX Runtime 1.5× eager at batch 1 and 8, TorchScript about eager's time; with `successor`, the dynamo
    export's ONNX Runtime 1.25× the TorchScript export's."""
    variants = [("eager", 1.0), ("torchscript", 1 / 1.01), ("ort", 1 / 1.5)] + [("ort-dynamo", 1 / 1.875)] * successor
    return [_pass(NB03, v, 2000.0 * f / (1 + (b > 1)), rng, batch=b) for b in (1, 8) for v, f in variants]


def _study04(rng) -> list[dict]:
    """Sorted batches 1.4× unsorted ones at batch 8 and 16 (less padding)."""
    return [_pass(NB04, "eager", 1000.0 / gain, rng, batch=b, strategy=s, waste=w) for b in (8, 16)
            for s, gain, w in (("unsorted", 1.0, 0.5), ("sorted", 1.4, 0.05))]


def _study05(rng) -> list[dict]:
    """Per Keras backend's process, eager PyTorch, its A/A copy and the backend's Keras 3 model: on JAX (jit) 2×
    eager, on TensorFlow eager's time, on PyTorch half eager's speed."""
    return [_row(NB05, v, 10.0 / gain, rng, backend=b) for b, keras, k_gain in
            (("torch", "keras-torch", 0.5), ("tensorflow", "keras-tensorflow", 1.0), ("jax", "keras-jax-jit", 2.0))
            for v, gain in (("eager", 1.0), ("eager-aa", 1.0), (keras, k_gain))]


def _study07(rng) -> list[dict]:
    """A tiny Llama's prefill and decode step: ONNX Runtime 1.5× eager's dynamic cache in both, the static cache about
    eager's time (the phase in `strategy`, the new tokens in `data`, as the study writes them)."""
    return [_row(NB07, v, ms * f, rng, model="llama-tiny", seq=16, strategy=phase, data="new8")
            for phase, ms in (("prefill", 10.0), ("decode", 2.0))
            for v, f in (("eager", 1.0), ("eager-aa", 1.0), ("static", 1 / 1.01), ("ort", 1 / 1.5))]


@dataclass(frozen=True)
class Case:
    """A comparison whose decision the doctored table flips, the fake results of its study, and the page elements
    that state its decision."""

    notebook: str
    label: str
    rows: Callable
    elements: tuple[str, ...]


# An option over the study's default: the decision table's column, the Answer, the findings' verdict line, the study's
# own findings (the roofline's regime lines name it), "How sure are we", the index's headline and "What to use", the
# summary's headline; in the data-set studies also "Which batch size".
OPTION = ("decision table", "Answer", "verdict line", "study findings", "how sure", "index headline", "what to use",
          "summary headline")
# A successor over the deprecated path it replaces: the Answer, the verdict line, the successor line under the Answer,
# "How sure are we", the claims that name the deprecated path, the summary's headline.
SUCCESSOR = ("Answer", "verdict line", "successor line", "how sure", "claims", "summary headline")
CASES = {
    "01 torch.compile": Case(NB01, "torch.compile (default) over eager", _study01, OPTION),
    "02 TorchScript": Case(NB02, "TorchScript over eager PyTorch", lambda rng: _study02(rng, False), OPTION),
    # study 02's roofline pairs export-aoti with torchscript too, so its regime line states this comparison
    "02 AOTInductor successor": Case(NB02, "torch.export + AOTInductor over TorchScript",
                                     lambda rng: _study02(rng, True), (*SUCCESSOR, "study findings")),
    # seed 000's and 001's claims count its decisions per shape ("similar results in most cases", "sometimes faster")
    "02 tf.function": Case(NB02, "tf.function over eager PyTorch", lambda rng: _study02(rng, False, tf=True),
                           ("decision table", "verdict line", "how sure", "claims")),
    "03 ONNX Runtime": Case(NB03, "ONNX Runtime over eager PyTorch", lambda rng: _study03(rng, False),
                             (*OPTION, "which batch size")),
    "03 dynamo export successor": Case(NB03, "dynamo ONNX export over the TorchScript export",
                                       lambda rng: _study03(rng, True), SUCCESSOR),
    "04 sorted": Case(NB04, "sorted over unsorted batches", _study04, (*OPTION, "which batch size")),
    # its claims measure whether the fastest Keras 3 variant beats native eager PyTorch: this comparison
    "05 Keras on JAX": Case(NB05, "Keras 3 (JAX, jit) over eager PyTorch", _study05, (*OPTION, "claims")),
    "07 ONNX Runtime": Case(NB07, "ONNX Runtime (optimum) over eager", _study07, OPTION),
}
# Elements that decide for themselves, and where (their xfail, strict, turns into a failure once they read the
# table); none since the roofline's regime lines and study 05's claims read it (issue 45, items 1 and 6).
OWN_VERDICT = {}  # (element, case key or None: every case) -> where it decides for itself


def _own_verdict(key: str, element: str) -> str | None:
    return OWN_VERDICT.get((element, key)) or OWN_VERDICT.get((element, None))


# --- one page, real or doctored ----------------------------------------------------------------------------------------


@dataclass
class Page:
    elements: dict[str, list[str]]  # what each element says, as lines
    vt: verdicts.VerdictTable  # the verdict table the run saved
    options: set[str]  # the option names of the flipped comparison's rows (decision table columns)


def _flipped(vt: verdicts.VerdictTable, label: str) -> verdicts.VerdictTable:
    """`vt` with the decisions of `label`'s rows flipped (FLIP) and every number kept."""
    rows = tuple(dataclasses.replace(v, decision=FLIP[v.decision]) if v.comparison == label and v.decision in FLIP
                 else v for v in vt.rows)
    return dataclasses.replace(vt, rows=rows)


def _page(case: Case, rows: list[dict], outputs, flip: str | None) -> Page:
    """The page elements of `case.notebook` from `rows`, in their own outputs/, with `flip`'s decisions doctored."""
    nb, study_ = case.notebook, STUDIES[case.notebook]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUDYLIB_OUTPUTS", str(outputs))
        table = ResultsTable(paths.results_dir(PROFILE) / f"{nb}.jsonl")
        for row in rows:
            table.append(row)
        df = table.frame(with_samples=True)
        write_json_atomic(paths.results_dir(PROFILE) / "env.json", {})
        vt = study.StudyRun._decide(SimpleNamespace(notebook=nb, profile=PROFILE), df)  # as ctx.run: decided, saved
        if flip:  # the saved table doctored: what the index and the summary read, and what analyse is handed
            vt = verdicts.load(verdicts.save(_flipped(vt, flip), paths.results_dir(PROFILE)))
        analysis = study_.analyse(df, PEAKS, vt=vt)
        dt = decisions.decision_table(vt)
        columns = [c for c in dt.columns if c != "workload" and not c.endswith("(baseline)")]
        use = summary.what_to_use(PROFILE)
        heads = summary.headline_speedups([PROFILE])
        heads = heads[heads.status == "ok"]
        sure, batches = answer.verdict_rows(vt), decisions.batch_table(vt)
        elements = {
            "decision table": [f"{c} at {w}: {cell}" for c in columns for w, cell in zip(dt.workload, dt[c])],
            "Answer": prose.answer_sentences(vt),
            "verdict line": prose.verdict_lines(vt),
            "study findings": list(analysis.findings),
            "successor line": [prose.successor_line(vt, study_.comparisons)],
            "claims": [f"{r['our measurement (95% CI)']} — {r['verdict']}" for r in analysis.claims.to_dict("records")],
            "index headline": [render._headline(PROFILE, nb)],
            "what to use": [f"{r.workload}: {r.decision}" for r in use.itertuples()],
            "summary headline": [f"{r.comparison}: {r.reading} ({r.speedup:.3f})" for r in heads.itertuples()],
            "how sure": [f"{r['comparison']} at {r['shape']}: {r['decision']}" for r in sure.to_dict("records")],
            "which batch size": [f"{r['option']} at batch {r['batch']}: {r['decision']}"
                                 for r in batches.to_dict("records")],
            "fastest backend": [f"{r['fastest']} over {r['runner-up']} at {r['shape']}: "
                                + ("decided" if r["decided"] is True else "not decided")
                                for r in analysis.tables.get("backends", pd.DataFrame()).to_dict("records")],
        }
    options = {v.candidate for v in vt.rows if v.kind == "option" and v.comparison == case.label}
    return Page(elements, vt, options)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """(real page, doctored page) of a case, built once per module: the same rows in both, in outputs/ of their own."""
    built = {}

    def both(key: str) -> tuple[Page, Page]:
        if key not in built:
            case = CASES[key]
            rows = case.rows(np.random.default_rng(45))
            folder = tmp_path_factory.mktemp(re.sub(r"\W+", "-", key))
            built[key] = (_page(case, rows, folder / "real", None), _page(case, rows, folder / "doctored", case.label))
        return built[key]

    return both


# Elements with a line per comparison, which opens with the comparison's label (a lead's line, "X over Y (fastest
# over runner-up)", names the option too but is another comparison).
BY_LABEL = {"verdict line": "**{}**:", "how sure": "{} at ", "summary headline": "{}: "}


def _stating(key: str, page: Page, element: str) -> list[str]:
    """The lines of `element` that state the case's comparison: its own line where the element has one per comparison
    (BY_LABEL); else the lines that name it (its label, 'X over Y', 'X against Y', or its option's name), which in
    the study's own findings and the claims also say a decision."""
    case = CASES[key]
    if element in BY_LABEL:
        return [line for line in page.elements[element] if line.startswith(BY_LABEL[element].format(case.label))]
    c = next(c for c in STUDIES[case.notebook].comparisons if c.label == case.label)
    said = {case.label, f"{c.candidate} over {c.baseline}", f"{c.candidate} against {c.baseline}",
            f"`{c.candidate}` against `{c.baseline}`", *page.options}
    names = re.compile("|".join(rf"(?<![\w-]){re.escape(s)}(?![\w-])" for s in sorted(said, key=len, reverse=True)))
    lines = [line for line in page.elements[element] if names.search(line)]
    return [line for line in lines if DECISION_WORDS.search(line)] if element in ("study findings", "claims") else lines


# --- the checks -------------------------------------------------------------------------------------------------------


def test_every_study_notebook_has_a_case():
    notebooks = {p.stem for p in paths.NOTEBOOKS_DIR.glob("*.ipynb")} - {paths.SUMMARY_NOTEBOOK}
    assert notebooks <= {c.notebook for c in CASES.values()}
    assert all(any(c.label == case.label for c in STUDIES[case.notebook].comparisons) for case in CASES.values())


@pytest.mark.parametrize("key", CASES)
def test_the_doctored_table_flips_the_decision_and_keeps_every_number(pages, key):
    real, doctored = pages(key)
    label = CASES[key].label
    before, after = real.vt.of(label), doctored.vt.of(label)
    assert before and {v.decision for v in before} == {"faster"}, [v.decision for v in before]
    assert [v.decision for v in after] == ["slower"] * len(before)
    numbers = ("speedup", "ci_low", "ci_high", "ms_per_call", "base_ms_per_call", "p", "one_time_s")
    assert [[getattr(v, n) for n in numbers] for v in after] == [[getattr(v, n) for n in numbers] for v in before]
    others = [(v.comparison, v.shape, v.decision) for v in real.vt if v.comparison != label]
    assert others == [(v.comparison, v.shape, v.decision) for v in doctored.vt if v.comparison != label]


CHECKED = [(key, element) for key, case in CASES.items() for element in case.elements]


@pytest.mark.parametrize("key, element", CHECKED)
def test_the_element_states_the_comparison(pages, key, element):
    """Each element checked below names the comparison on the real page (else its check would prove nothing)."""
    real, _ = pages(key)
    assert _stating(key, real, element), f"{element} does not state {CASES[key].label!r}: {real.elements[element]}"


@pytest.mark.parametrize("key, element", [
    pytest.param(key, element, marks=pytest.mark.xfail(strict=True, reason=_own_verdict(key, element)))
    if _own_verdict(key, element) else (key, element) for key, element in CHECKED])
def test_the_element_changes_with_the_verdict_table(pages, key, element):
    """What an element says of the comparison is gone from it once the table's decision flips: every such line reads
    the table. A line still there decides for itself."""
    real, doctored = pages(key)
    kept = [line for line in _stating(key, real, element) if line in doctored.elements[element]]
    assert not kept, (f"{element} ({CASES[key].notebook}) decides {CASES[key].label!r} for itself: with the verdict "
                      f"table's decision flipped it still says {kept}")


def test_the_fastest_backend_reads_the_tables_lead(tmp_path):
    """Study 05's backend table (and the claims that count its decided shapes) says whether the fastest Keras 3
    backend beats the runner-up as the table's fastest-over-runner-up row decides it, where the two are the shape's
    two fastest options: here keras-jax-jit 2× eager, keras-tensorflow-jit 1.6×."""
    def rows(rng):
        return [_row(NB05, v, 10.0 / gain, rng, backend=b) for b, keras, k_gain in
                (("torch", "keras-torch", 0.5), ("tensorflow", "keras-tensorflow-jit", 1.6), ("jax", "keras-jax-jit", 2.0))
                for v, gain in (("eager", 1.0), ("eager-aa", 1.0), (keras, k_gain))]

    case = Case(NB05, "", rows, ())
    fake = rows(np.random.default_rng(45))
    real = _page(case, fake, tmp_path / "real", None)
    lead = [v for v in real.vt if v.kind == "lead"]
    assert [(v.candidate_value, v.baseline_value, v.decision) for v in lead] == [
        ("keras-jax-jit", "keras-tensorflow-jit", "faster")]
    doctored = _page(dataclasses.replace(case, label=lead[0].comparison), fake, tmp_path / "doctored",
                     lead[0].comparison)
    assert real.elements["fastest backend"] == ["keras-jax-jit over keras-tensorflow-jit at bert-tiny fp32 b1 × s16: "
                                                "decided"]
    assert doctored.elements["fastest backend"] == [real.elements["fastest backend"][0].replace("decided",
                                                                                              "not decided")]


# --- by the import graph: who reaches the decision rule ----------------------------------------------------------------

SRC = paths.ROOT / "src" / "studylib"
# The rule (speedups.verdict, and the judging step that applies it over a page: speedups.judge) and what computes a
# verdict table (verdicts.compute, verdicts.for_study). stats/ holds them; outside it, the table is computed once where
# a run ends and the rule reached only through verdicts.unlisted (comparisons the table does not hold) and
# verdicts.direction (compare's reproduction test).
RULE = {("speedups", "verdict"), ("speedups", "judge"), ("speedups", "bh_adjust"), ("speedups", "p_beyond_band"),
        ("verdicts", "compute"), ("verdicts", "for_study")}
# where a run ends and its table is computed: a study run (StudyRun._decide), and quick.compare's (the Lab's own run)
RUN_ENDS = {("study.py", "verdicts", "for_study"), ("quick.py", "verdicts", "compute")}


def _reaching_the_rule(path) -> list[tuple[str, str, str, int]]:
    """(module file, module alias's target, name, line) of every use of a RULE name in a module: an import of it from
    its module, or an attribute of an alias bound to that module (`speedups_layer.verdict`)."""
    import ast

    tree = ast.parse(path.read_text())
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")[-1]
            for a in node.names:
                if (module, a.name) in RULE:
                    found.append((path.name, module, a.name, node.lineno))
                if module in ("stats", "") and a.name in ("speedups", "verdicts"):  # `from . import` inside stats/
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if (aliases[node.value.id], node.attr) in RULE:
                found.append((path.name, aliases[node.value.id], node.attr, node.lineno))
    return found


def test_only_the_statistics_layer_and_the_run_s_end_reach_the_decision_rule():
    uses = [u for p in sorted(SRC.rglob("*.py")) if "stats" not in p.relative_to(SRC).parts
            for u in _reaching_the_rule(p)]
    outside = [u for u in uses if u[:3] not in RUN_ENDS]
    assert not outside, outside
    assert sorted(u[:3] for u in uses) == sorted(RUN_ENDS)  # each run end computes its table once, in one place
    assert _reaching_the_rule(SRC / "stats" / "verdicts.py")  # the scan sees a use where there is one


def test_every_study_analysis_takes_the_run_s_verdict_table():
    import inspect

    for name, s in STUDIES.items():
        parameter = inspect.signature(s.analyse).parameters.get("vt")
        assert parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default is inspect.Parameter.empty, name  # required: never computed in its place
