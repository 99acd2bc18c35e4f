"""The verdict table (stats/verdicts.py) and what pages say from it (report/decisions.py, report/answer.py): one
verdict per comparison, computed once, saved, and the only source of every page element that decides."""

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from studylib.core import paths
from studylib.core.files import write_json_atomic
from studylib.report import answer, decisions, prose, render, summary
from studylib.stats import calibration, verdicts

NB = "01_eager_vs_compiled"
rng = np.random.default_rng(7)


def _row(variant, model, batch, median, *, status="ok", prepare=0.0, first=None, image=False, rounds=40):
    row = {"study": NB, "profile": "cpu", "model": model, "variant": variant, "dtype": "fp32", "batch_size": batch,
           "seq_len": None if image else 128, "image_size": 224 if image else None, "device": "cpu", "threads": 2,
           "task": "vision" if image else "text", "status": status, "error": "" if status == "ok" else "boom",
           "config_key": f"{model}|{variant}|{batch}"}
    if status != "ok":
        return row
    samples = list(median * rng.normal(1, 0.004, rounds))
    return row | {"samples_s": samples, "sample_rep": [0] * rounds, "sample_round": list(range(rounds)),
                  "group_id": f"{model}|{batch}", "median_s": float(np.median(samples)),
                  "first_call_s": first or median, "prepare_s": prepare, "max_abs_diff": 0.0, "parity_ok": True}


@pytest.fixture
def results():
    """Study 01's shape of results: compile-default faster on the image model, equal on the text model, a failed
    channels-last row, an A/A copy."""
    return pd.DataFrame([
        _row("eager", "bert-base", 1, 0.100), _row("eager-aa", "bert-base", 1, 0.100),
        _row("compile-default", "bert-base", 1, 0.0995, prepare=0.1, first=7.0),
        _row("eager", "resnet-50", 8, 0.200, image=True), _row("eager-aa", "resnet-50", 8, 0.200, image=True),
        _row("compile-default", "resnet-50", 8, 0.140, prepare=0.2, first=12.0, image=True),
        _row("eager-channels-last", "resnet-50", 8, 0.0, status="oom", image=True),
    ])


def test_every_option_is_judged_once_over_the_default_with_its_numbers(results):
    vt = verdicts.for_study(NB, results)
    opts = {(v.candidate, v.workload): v for v in vt.options()}
    text = opts["compile-default", "bert-base fp32 batch 1 seq 128"]
    image = opts["compile-default", "resnet-50 fp32 batch 8 224px"]
    assert text.decision == "equal" and image.decision == "faster" and image.speedup == pytest.approx(1 / 0.7, rel=0.02)
    assert image.comparison == "torch.compile (default) over eager" and image.baseline == "eager"
    assert image.ms_per_call == pytest.approx(140, rel=0.02) and image.ms_per_item == pytest.approx(image.ms_per_call / 8)
    assert image.item == "image" and image.call == "call of 8 images"
    # one-time cost = preparation + first call - one steady call; the calls that pay it back
    assert image.one_time_s == pytest.approx(0.2 + 12.0 - image.ms_per_call / 1e3, rel=1e-6)
    assert image.break_even == np.ceil(image.one_time_s / (image.base_ms_per_call / 1e3 * (1 - 1 / image.speedup)))
    assert image.rerun_low < image.ci_low < image.speedup < image.ci_high < image.rerun_high
    failed = opts["eager-channels-last", "resnet-50 fp32 batch 8 224px"]
    assert failed.status == "oom" and failed.decision == "" and "boom" in failed.message
    assert not any("-aa" in v.candidate for v in vt)  # an A/A copy is never an option
    # Benjamini–Hochberg once over the study's whole table: adjusted p never below the raw one
    assert all(v.p >= 0 for v in vt if v.ok)


def test_the_rerun_interval_is_wider_than_the_ci_by_about_root_two():
    lo, hi = calibration.rerun_interval(1.2, 0.01, 1e6)
    assert np.log(hi / 1.2) == pytest.approx(1.96 * np.sqrt(2) * 0.01, rel=1e-3)
    assert np.isnan(calibration.rerun_interval(float("nan"), 0.01, 5)[0])


def test_a_saved_table_reads_back_the_same(results, tmp_path):
    vt = verdicts.for_study(NB, results)
    back = verdicts.load(verdicts.save(vt, tmp_path))
    assert len(back) == len(vt)
    for a, b in zip(vt, back):
        for field in verdicts.COLUMNS:
            x, y = getattr(a, field), getattr(b, field)
            if isinstance(x, float):
                assert (np.isnan(x) and np.isnan(y)) or x == pytest.approx(y), field
            else:
                assert x == y, field
    assert len(verdicts.load(tmp_path / "missing.verdicts.csv")) == 0


def _page_elements(profile: str, df: pd.DataFrame) -> dict[str, str]:
    """Every element that names a comparison, rendered from what is saved on disk."""
    vt = verdicts.load(verdicts.path_for(paths.results_dir(profile), NB))
    return {"top of the page": answer.top_html(NB, vt, df, "a test machine"),
            "findings": "\n".join(prose.verdict_lines(vt)),
            "how sure": answer.how_sure_html(vt, df),
            "index headline": render._headline(profile, NB),
            "index what to use": render._what_to_use(profile, {}),
            "summary headline": summary.speedup_matrix(summary.headline_speedups([profile])).to_string()}


def test_editing_one_saved_verdict_changes_every_page_element_that_names_it(results, outputs):
    profile = "cpu"
    saved = verdicts.save(verdicts.for_study(NB, results), paths.results_dir(profile))
    write_json_atomic(paths.results_dir(profile) / "env.json", {})
    before = _page_elements(profile, results)
    for name, text in before.items():
        assert re.search(r"1\.4\d+×", text), name  # compile-default's 1.43× on resnet-50 is named everywhere
        assert "0.50×" not in text, name

    table = pd.read_csv(saved, dtype=str, keep_default_na=False)
    row = (table.candidate == "compile-default") & table.workload.str.startswith("resnet-50") & (table.kind == "option")
    assert row.sum() == 1
    table.loc[row, ["speedup", "ci_low", "ci_high", "rerun_low", "rerun_high", "decision"]] = [
        "0.5", "0.45", "0.55", "0.42", "0.58", "slower"]
    table.to_csv(saved, index=False)

    after = _page_elements(profile, results)
    for name, text in after.items():
        assert not re.search(r"1\.4\d×", text), name
        assert "0.50×" in text or "slower" in text, name
    assert "slower" in after["top of the page"] and "Pick: " in after["top of the page"]
    assert "every option is slower" in after["index what to use"]
    assert "slower" in after["summary headline"]


def test_the_answer_is_short_and_never_names_a_winner_of_a_tie(results):
    vt = verdicts.for_study(NB, results)
    sentences = prose.answer_sentences(vt)
    assert prose.words(" ".join(sentences)) <= prose.ANSWER_WORDS
    assert sentences[0].startswith("Pick: ")
    picks = decisions.what_to_use(vt, "01").set_index("workload").decision
    assert picks["bert-base fp32 batch 1 seq 128"] == "tie: keep the default (eager)"
    assert re.fullmatch(r"use compile-default \(1\.4[23]\d?× faster\)", picks["resnet-50 fp32 batch 8 224px"])
    assert "Ties are within ±5%" in sentences[-1]


def test_a_quantized_option_stands_apart_and_a_lead_that_is_not_told_apart_names_both():
    rows = [_row("eager", "m", 1, 0.10), _row("ort", "m", 1, 0.050), _row("ort-optimized", "m", 1, 0.0501),
            _row("ort-int8", "m", 1, 0.02)]
    vt = verdicts.for_study("03_onnx_batching", pd.DataFrame(rows))
    [pick] = decisions.what_to_use(vt, "03").to_dict("records")
    assert pick["decision"].startswith("use ort") and " or " in pick["decision"]  # ort vs ort-optimized: a tie
    whose = pick["decision"].split()[1]  # the first named: its numbers fill the row, and they say so
    assert pick["speed-up over default (CI at its page's level)"].startswith(f"{whose}: ")
    assert pick["latency"].startswith(f"{whose}: ")
    assert "int8" not in pick["decision"] and pick["quantized option (changes outputs)"].startswith("ort-int8: ")
    lead = vt.lead(vt.options()[0].workload)
    assert lead is not None and lead.decision in ("equal", "undecided") and lead.kind == "lead"


def test_a_declared_comparison_of_the_fastest_over_its_runner_up_is_the_lead_the_pick_reads():
    """Study 01 declares export-aoti over compile-default: where they are the fastest and the runner-up, that row is
    the lead (no second one is computed), so a pick never says 'use export-aoti' while it says they are not told
    apart."""
    rows = [_row("eager", "m", 1, 0.10), _row("compile-default", "m", 1, 0.0800), _row("export-aoti", "m", 1, 0.0799)]
    vt = verdicts.for_study(NB, pd.DataFrame(rows))
    workload = vt.options()[0].workload
    lead = vt.lead(workload)
    assert lead is not None and lead.kind == "declared" and (lead.candidate, lead.baseline) == ("export-aoti",
                                                                                                 "compile-default")
    assert not [v for v in vt if v.kind == "lead"] and lead.decision in ("equal", "undecided")
    words, top = decisions.pick(vt, workload)
    assert words == f"use export-aoti or compile-default (not told apart: {lead.decision})" and top.candidate == \
        "export-aoti"
    # where the default is the runner-up there is no lead: the option's own row decides
    alone = verdicts.for_study(NB, pd.DataFrame([_row("eager", "m", 1, 0.10), _row("export-aoti", "m", 1, 0.08),
                                                 _row("compile-default", "m", 1, 0.12)]))
    assert alone.lead(workload) is None and decisions.pick(alone, workload)[0] == "use export-aoti"


def test_the_decision_table_has_a_cell_per_option_with_its_decision_and_latency(results):
    t = decisions.decision_table(verdicts.for_study(NB, results))
    assert list(t.columns[:2]) == ["workload", "eager (baseline)"]
    cell = t.set_index("workload").loc["resnet-50 fp32 batch 8 224px", "compile-default"]
    assert cell.startswith("faster: 1.4") and "/call" in cell and "/image" in cell
    assert t.set_index("workload").loc["resnet-50 fp32 batch 8 224px", "eager-channels-last"].startswith("oom")
    assert not t.isin(["nan", "None", "<NA>"]).any().any()


def test_every_runtime_a_page_can_name_is_glossed():
    from studylib import runtimes
    from studylib.core.config import is_aa
    from studylib.report import glossary

    names = {n for n in runtimes.REGISTRY if not is_aa(n)}
    assert names == {r.name for r in runtimes.declared()}  # every registration carries its gloss
    assert all(f"<code>{n}</code>" in glossary.html_list() for n in names)
    assert "<dt><code>ort-int8</code></dt><dd>ONNX Runtime on the dynamically int8-quantized model" in glossary.html_list()


def test_the_answer_speaks_of_full_precision_options_before_quantized_ones_however_fast():
    rows = [_row("eager", "m", 1, 0.10), _row("ort", "m", 1, 0.050), _row("ort-int8", "m", 1, 0.01)]
    sentences = prose.answer_sentences(verdicts.for_study("03_onnx_batching", pd.DataFrame(rows)))
    ort = next(i for i, s in enumerate(sentences) if s.startswith("ort pays off"))
    int8 = next(i for i, s in enumerate(sentences) if s.startswith("ort-int8 (int8: changes outputs) pays off"))
    assert 0 < ort < int8  # the pick first, then ort (2×) before ort-int8 (10×, but it changes outputs)


def test_a_heading_closes_the_answer_box_and_the_notes_sit_under_it(results):
    top = answer.top_html(NB, verdicts.for_study(NB, results), results, "a test machine", why="GEMMs differ.")
    after = top.split('class="answer"', 1)[1].split("</div>", 1)[1]
    assert after.lstrip().startswith("<h2>Decision table</h2>")  # the Answer box first, then the table it reads
    after = after.split("</table>")[-1]
    assert after.startswith('<p style="color:#444;font-size:.9em">Each cell:')  # the table's caption under it
    after = after.split("</p>", 1)[1]
    assert after.startswith("<h3>Why, and where this answer holds</h3>")
    assert "<strong>Why.</strong> GEMMs differ." in after and "<strong>On a GPU.</strong>" in after
    box = top.split('class="answer"', 1)[1].split("</div>", 1)[0]
    assert "On a GPU" not in box and "GEMMs differ" not in box and "Measured on a test machine." in box


def test_workloads_that_differ_in_one_word_are_named_once():
    assert prose.joined(["roberta fp32 batch 1 seq 128", "roberta fp32 batch 8 seq 128"]) == "roberta fp32 batch 1 and 8 seq 128"
    assert prose.joined(["resnet fp32 batch 8", "resnet bf16 batch 1"]) == "resnet fp32 batch 8, resnet bf16 batch 1"
    assert prose.joined(["bert seq 128"]) == "bert seq 128"


def test_two_options_not_told_apart_are_one_pick_whichever_was_ahead():
    rows = [_row(v, "m", b, t) for b in (1, 8) for v, t in
            (("eager", 0.10), ("ort", 0.050 + 1e-4 * (b == 1)), ("ort-optimized", 0.050 + 1e-4 * (b == 8)))]
    first = prose.pick_sentence(verdicts.for_study("03_onnx_batching", pd.DataFrame(rows)))
    # one pick, named as the first workload orders it (the fastest first, as the index's row for it does)
    assert first.count("use ") == 1 and "use ort-optimized or ort" in first and "every workload" in first


def test_the_successors_of_deprecated_paths_are_options_and_compared_with_what_they_replace():
    """Study 03's dynamo ONNX export beside the TorchScript one, torchao's int8 beside torch.ao's: each an option over
    eager like any other, and a declared comparison with the path it replaces that the decision table and Answer say."""
    rows = [_row("eager", "m", 1, 0.10), _row("ort", "m", 1, 0.050), _row("ort-dynamo", "m", 1, 0.040),
            _row("torch-int8", "m", 1, 0.06), _row("torchao-int8", "m", 1, 0.0601)]
    vt = verdicts.for_study("03_onnx_batching", pd.DataFrame(rows))
    options = {v.candidate: v for v in vt.options()}
    assert options["ort-dynamo"].decision == options["torchao-int8"].decision == "faster"  # over eager
    dynamo = vt.of("dynamo ONNX export over the TorchScript export")
    assert [(v.kind, v.candidate, v.baseline, v.decision) for v in dynamo] == [("declared", "ort-dynamo", "ort",
                                                                                "faster")]
    assert dynamo[0].speedup == pytest.approx(1.25, rel=0.02)
    ao = vt.of("torchao int8 over torch.ao int8")
    assert [(v.candidate, v.baseline, v.decision) for v in ao] == [("torchao-int8", "torch-int8", "equal")]
    table = decisions.decision_table(vt)
    assert {"ort-dynamo", "torchao-int8"} <= set(table.columns)
    text = " ".join(prose.answer_sentences(vt))
    assert "ort-dynamo pays off at" in text
    assert "dynamo ONNX export over the TorchScript export: faster at" in text


def test_the_page_says_where_each_successor_matches_or_beats_the_path_it_replaces():
    """Under the Answer's heading: the dynamo exporter beats the TorchScript export at batch 1 and matches it at 8;
    torchao's int8 falls behind torch.ao's at batch 1 — each clause from the declared rows, named with what it replaces."""
    rows = [_row(v, "m", b, t) for v, b, t in
            (("eager", 1, 0.10), ("ort", 1, 0.050), ("ort-dynamo", 1, 0.040), ("torch-int8", 1, 0.05),
             ("torchao-int8", 1, 0.08), ("eager", 8, 0.50), ("ort", 8, 0.30), ("ort-dynamo", 8, 0.3001),
             ("torch-int8", 8, 0.2), ("torchao-int8", 8, 0.2001))]
    vt = verdicts.for_study("03_onnx_batching", pd.DataFrame(rows))
    from studylib.studies import STUDIES

    line = prose.successor_line(vt, STUDIES["03_onnx_batching"].comparisons)
    dynamo, ao = line.split("**Successors of deprecated paths.** ", 1)[1].split(". `torchao-int8`")
    assert dynamo.startswith("`ort-dynamo` against `ort` (torch.onnx.export's TorchScript-based exporter")
    # each speed-up at the decimals its CI supports (core/numbers.py)
    assert re.search(r"beats it at m fp32 batch 1 seq 128 \(1\.2[45]\d?×\)", dynamo), dynamo
    assert re.search(r"falls behind at m fp32 batch 1 seq 128 \(0\.6[12]\d?×\)", ao), ao
    assert "matches it at m fp32 batch 8 seq" in dynamo and "matches it at m fp32 batch 8 seq" in ao
    top = answer.top_html("03_onnx_batching", vt, pd.DataFrame(rows), "a test machine")
    after = top.split('class="answer"', 1)[1].split("</div>", 1)[1]
    assert "<strong>Successors of deprecated paths.</strong> <code>ort-dynamo</code> against" in after
    assert prose.successor_line(vt, STUDIES[NB].comparisons) == ""  # study 01 declares no successor


def test_export_aoti_is_an_option_and_compared_with_the_paths_it_sits_beside():
    """torch.export + AOTInductor: an option over eager like any other (its one-time cost is its preparation), and a
    declared comparison with torch.compile in study 01 (ahead of time vs just in time) and with TorchScript, the
    deprecated path it succeeds, in study 02."""
    rows = [_row("eager", "bert-base", 1, 0.100), _row("compile-default", "bert-base", 1, 0.080, first=7.0),
            _row("export-aoti", "bert-base", 1, 0.080, prepare=40.0)]
    vt = verdicts.for_study(NB, pd.DataFrame(rows))
    [over_eager] = vt.of("torch.export + AOTInductor over eager")
    assert (over_eager.kind, over_eager.candidate, over_eager.decision) == ("option", "export-aoti", "faster")
    assert over_eager.one_time_s == pytest.approx(40.0, rel=1e-3)
    [aot_jit] = vt.of("torch.export + AOTInductor (ahead of time) over torch.compile (just in time)")
    assert (aot_jit.kind, aot_jit.candidate, aot_jit.baseline, aot_jit.decision) == (
        "declared", "export-aoti", "compile-default", "equal")
    rows02 = [_row("eager", "bert-base", 1, 0.100), _row("torchscript", "bert-base", 1, 0.090),
              _row("export-aoti", "bert-base", 1, 0.060, prepare=40.0)]
    [successor] = verdicts.for_study("02_torchscript_vs_xla", pd.DataFrame(rows02)).of(
        "torch.export + AOTInductor over TorchScript")
    assert (successor.kind, successor.decision) == ("declared", "faster")
    assert successor.speedup == pytest.approx(1.5, rel=0.02)



def _consistent(vt) -> list[str]:
    """Every verdict whose decision and printed interval say different things (none where the table is right)."""
    out = []
    for v in vt:
        if not v.ok:
            continue
        beyond = v.ci_low > v.band or v.ci_high < 1 / v.band
        inside = 1 / v.band <= v.ci_low and v.ci_high <= v.band
        if (v.decision in ("faster", "slower")) != beyond or (v.decision == "equal") != inside:
            out.append(f"{v.comparison} at {v.shape}: {v.decision} beside {v.ci_low:.3f}–{v.ci_high:.3f}")
    return out


def test_no_verdict_is_decided_beside_an_interval_crossing_the_band_nor_undecided_beside_one_beyond_it():
    """Fake-clock rows of many shapes, options with no effect (the A/A case), a small one and a large one: one level
    for the table's family, 1 − R·q/m, and every decision is what its printed interval says."""
    rows = []
    for i in range(12):
        model = f"m{i}"
        rows += [_row("eager", model, 1, 0.100), _row("compile-default", model, 1, 0.100),
                 _row("compile-max-autotune", model, 1, 0.100 / (1.06 if i % 2 else 1.5))]
    vt = verdicts.compute(NB, pd.DataFrame(rows))
    assert len(vt) >= 24 and len({v.level for v in vt if v.ok}) == 1
    decided = sum(v.decision in ("faster", "slower") for v in vt if v.ok)
    m = sum(v.ok for v in vt)
    assert next(iter(vt)).level == pytest.approx(1 - max(decided, 1) * 0.05 / m)
    assert not any(v.decision == "faster" for v in vt if v.candidate == "compile-default")  # no effect, none found
    assert any(v.decision == "faster" for v in vt) and not _consistent(vt)
    doctored = verdicts.VerdictTable(NB, tuple(v if i else dataclasses.replace(v, decision="undecided", ci_low=1.2)
                                               for i, v in enumerate(vt)))
    assert len(_consistent(doctored)) == 1  # the check sees a disagreement where there is one


def test_a_workload_several_studies_measured_is_one_row_with_the_fastest_found_and_every_baseline():
    """The index's cross-study row: one per model, precision and shape two studies share, never for one alone."""
    first = verdicts.for_study(NB, pd.DataFrame([_row("eager", "m", 1, 0.100), _row("compile-default", "m", 1, 0.080),
                                                 _row("eager", "solo", 1, 0.050),
                                                 _row("compile-default", "solo", 1, 0.040)]))
    second = verdicts.for_study(NB, pd.DataFrame([_row("eager", "m", 1, 0.150), _row("export-aoti", "m", 1, 0.070)]))
    t = decisions.across_studies({"01_a": first, "05_b": second}, {"01_a": "alone", "05_b": "beside Keras"})
    [row] = t.to_dict("records")  # "solo" is one study's only
    assert row["workload"] == "m fp32 batch 1 seq 128"
    assert row["fastest found (by latency)"].startswith("export-aoti (study 05): ")
    assert row["its decision in its study"].startswith("faster: 2.14×") and row["its decision in its study"].endswith(
        "over eager")
    assert re.fullmatch(r"01 eager: (99\.\d|100) ms/call; 05 eager: 1(49|50)(\.\d)? ms/call", row["baselines"])
    assert row["slowest baseline over fastest"] in ("1.49×", "1.50×", "1.51×")
    assert row["how each study runs it"] == "01: alone; 05: beside Keras"


def test_an_undecided_gain_gives_its_payback_at_the_point_estimate_marked_as_such():
    noisy = [_row("eager", "m", 1, 0.100), _row("compile-default", "m", 1, 0.095, prepare=2.0)]
    for r in noisy:  # a 5% gain inside wide noise: undecided
        r["samples_s"] = list(np.asarray(r["samples_s"]) * rng.normal(1, 0.08, len(r["samples_s"])))
    vt = verdicts.for_study(NB, pd.DataFrame(noisy))
    [v] = vt.options()
    assert v.decision == "undecided" and np.isfinite(v.break_even)
    [said] = answer.verdict_rows(vt)["paid back after"]
    assert said.endswith("calls at the point estimate (undecided: the gain may be none)"), said
