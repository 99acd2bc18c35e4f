"""`studylib compare REF NEW`: does a re-run reproduce the reference? Synthetic results folders, no torch."""

import json
import math

import pytest

from studylib.__main__ import main
from studylib.report.compare import CompareError, compare, format_comparison
from studylib.stats.verdicts import direction as verdict

NB = "01_eager_vs_compiled"
ROUNDS = 12
# One group at batch 1 with three variants and an A/A copy of eager; a second group at batch 8 whose
# A/A copy is 10% slower than eager in every round (an A/A "false positive" by construction).
TIMES = {(1, "eager"): 0.100, (1, "compiled"): 0.080, (1, "fast"): 0.050, (1, "eager-aa"): 0.100,
         (8, "eager"): 0.400, (8, "eager-aa"): 0.440}


def _samples(base: float, variant: str) -> list[float]:
    """Per-round times: a drift common to the round, and a small wiggle of each variant's own."""
    out = []
    for r in range(ROUNDS):
        common = 1 + 0.05 * math.sin(r)
        if variant.endswith("-aa"):
            own = 1 + 0.01 * (-1) ** r  # alternating ±1%: the median of the A/A log ratios is 0
        else:
            own = 1 + 0.002 * math.cos(3 * r + len(variant))
        out.append(base * common * own)
    return out


def _row(batch: int, variant: str, *, profile: str = "cpu", scale: float = 1.0, status: str = "ok") -> dict:
    samples = [s * scale for s in _samples(TIMES[(batch, variant)], variant)]
    ordered = sorted(samples)
    row = {
        "study": NB, "profile": profile, "config_key": f"bert|{variant}|fp32|b{batch}", "variant": variant,
        "model": "bert", "dtype": "fp32", "batch_size": batch, "seq_len": 128, "image_size": None,
        "strategy": None, "data": None, "status": status,
        # the CI here is a plain [3rd, 10th] order statistic: what matters is that it is a fixed interval
        "median_s": (ordered[5] + ordered[6]) / 2, "ci_low_s": ordered[2], "ci_high_s": ordered[9],
        "samples_s": samples, "sample_rep": [0] * ROUNDS, "sample_round": list(range(ROUNDS)),
        "group_id": f"run-b{batch}", "group_key": f"bert|fp32|b{batch}",
    }
    return row


def _write(folder, rows, *, profile="cpu", env=True, notebook=NB, tail=""):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{notebook}.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
        f.write(tail)
    if env:
        (folder / "env.json").write_text(json.dumps({"profile": profile, "python": "3.11"}))
    return folder


def _rows(**kw) -> list[dict]:
    return [_row(b, v, **kw) for b, v in TIMES]


def _line(c, notebook="all") -> dict:
    return c.table.set_index("notebook").loc[notebook].to_dict()


def test_verdict():
    assert verdict(1.1, 1.3) == "faster"
    assert verdict(0.7, 0.9) == "slower"
    assert verdict(0.9, 1.1) == "unclear"
    assert verdict(1.0, 1.2) == "unclear"


def test_identical_runs_reproduce_everything(tmp_path):
    ref = _write(tmp_path / "ref" / "cpu" / "results", _rows())
    new = _write(tmp_path / "new" / "cpu" / "results", _rows())
    c = compare(ref.parent, new)  # a profile folder is accepted for its results/
    assert c.ref == ref and c.profile == "cpu"
    line = _line(c)
    assert line == _line(c, NB)
    assert line["configs"] == 6
    assert line["new_in_ref_ci"] == line["ref_in_new_ci"] == 6 and line["new_in_ref_ci_share"] == 1.0
    assert line["median_abs_delta_pct"] == line["worst_abs_delta_pct"] == 0.0
    # pairs within the batch-1 group, A/A copies left out: eager/compiled, eager/fast, compiled/fast
    assert line["comparisons"] == 3 and line["same"] == 3
    assert line["reversed"] == 0 and line["decided_unclear"] == 0
    assert line["ref_decided"] == 3 and line["ref_decided_share"] == 1.0
    assert set(c.pairs["ref_verdict"]) == {"faster"}  # each later variant is faster than the earlier one
    assert c.reversed_pairs.empty


def test_a_variant_two_times_slower_reverses_a_pair_and_is_named(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    slow = [_row(b, v, scale=2.0 if v == "compiled" else 1.0) for b, v in TIMES]
    new = _write(tmp_path / "new", slow)
    c = compare(ref, new)
    line = _line(c)
    assert line["reversed"] == 1 and line["same"] == 2
    rp = c.reversed_pairs
    assert list(rp["a"]) == ["bert|eager|fp32|b1"] and list(rp["b"]) == ["bert|compiled|fp32|b1"]
    assert rp["ref_verdict"][0] == "faster" and rp["new_verdict"][0] == "slower"
    assert rp["ref_ratio"][0] == pytest.approx(1.25, rel=0.01) and rp["new_ratio"][0] == pytest.approx(0.625, rel=0.01)
    # the medians: compiled's doubled, the other five unchanged
    assert line["new_in_ref_ci"] == 5 and line["worst_abs_delta_pct"] == pytest.approx(100.0)
    assert c.worst_medians["config_key"][0] == "bert|compiled|fp32|b1"
    text = format_comparison(c)
    assert "reversed pairs (1)" in text
    assert "bert|eager|fp32|b1" in text and "bert|compiled|fp32|b1" in text and "+100.0%" in text


def test_aa_false_positives_are_counted_per_run(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    # in NEW the batch-8 A/A copy runs as fast as eager: no false positive there
    rows = [r for r in _rows() if r["config_key"] != "bert|eager-aa|fp32|b8"]
    aa8 = _row(8, "eager-aa", scale=1 / 1.1)
    new = _write(tmp_path / "new", rows + [aa8])
    line = _line(compare(ref, new))
    assert line["aa_pairs"] == 2
    assert line["aa_false_pos_ref"] == 1
    assert line["aa_false_pos_new"] == 0
    assert "1/2" in format_comparison(compare(ref, new)) and "0/2" in format_comparison(compare(ref, new))


def test_rows_failed_in_one_run_are_left_out_and_the_last_line_wins(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    # NEW measured everything fine, then re-measured `fast`, which failed: its newest row wins
    new = _write(tmp_path / "new", _rows() + [_row(1, "fast", status="error")])
    c = compare(ref, new)
    line = _line(c)
    assert line["configs"] == 5
    assert "bert|fast|fp32|b1" not in set(c.medians["config_key"])
    assert line["comparisons"] == 1  # only eager/compiled is left in the batch-1 group
    assert not ({"bert|fast|fp32|b1"} & (set(c.pairs["a"]) | set(c.pairs["b"])))


def test_a_torn_last_line_is_ignored(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    torn = json.dumps(_row(1, "compiled", scale=2.0))[:80]  # a crash mid-write: no newline
    new = _write(tmp_path / "new", _rows(), tail=torn)
    line = _line(compare(ref, new))
    assert line["configs"] == 6 and line["worst_abs_delta_pct"] == 0.0 and line["reversed"] == 0


def test_different_profiles_are_refused_naming_both(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    new = _write(tmp_path / "new", _rows(profile="cuda"), profile="cuda")
    with pytest.raises(CompareError, match=r"'cpu'.*'cuda'") as e:
        compare(ref, new)
    assert "\n" not in str(e.value)
    # without env.json, the rows' profile field decides
    (new / "env.json").unlink()
    (ref / "env.json").unlink()
    with pytest.raises(CompareError, match=r"'cpu'.*'cuda'"):
        compare(ref, new)


def test_missing_empty_or_unrelated_folders_are_refused(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    with pytest.raises(CompareError, match="no such folder") as e:
        compare(ref, tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match=r"no results \(\*\.jsonl\)"):
        compare(tmp_path / "empty", ref)
    other = _write(tmp_path / "other", _rows(), notebook="03_onnx_batching")
    with pytest.raises(CompareError, match="no notebook in common"):
        compare(ref, other)


def test_cli_prints_the_table_or_one_error_line(tmp_path, capsys):
    ref = _write(tmp_path / "ref", _rows())
    new = _write(tmp_path / "new", _rows())
    assert main(["compare", str(ref), str(new)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(ln for ln in lines if "new median in ref CI" in ln)
    assert "reversed" in header and "A/A false pos. (ref)" in header
    assert any(ln.split()[0] == NB for ln in lines if ln.strip())
    assert any(ln.split()[:2] == ["all", "6"] for ln in lines if ln.strip())
    assert "reversed pairs: none" in out

    assert main(["compare", str(ref), str(tmp_path / "nowhere")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "nowhere" in err[0]


def test_a_machine_wide_slowdown_is_the_shift_and_this_runs_ci_is_shown_beside_the_re_run_one(tmp_path):
    """NEW 10% slower everywhere: shift +10%; REF's within-run CIs (its two processes agree) miss it, its re-run CIs
    (the recorded shift between whole runs added) hold it."""
    def two_processes(scale):
        rows = []
        for b, v in TIMES:
            row = _row(b, v, scale=scale)
            xs = row["samples_s"]
            row |= {"samples_s": xs + [x * 1.01 for x in xs], "sample_rep": [0] * ROUNDS + [1] * ROUNDS,
                    "sample_round": list(range(ROUNDS)) * 2, "ci_run_low_s": row.pop("ci_low_s"),
                    "ci_run_high_s": row.pop("ci_high_s"), "run_shift_sigma": 0.06, "run_shift_df": 8}
            rows.append(row)
        return rows

    ref = _write(tmp_path / "ref", two_processes(1.0))
    new = _write(tmp_path / "new", two_processes(1.1))
    line = _line(compare(ref, new))
    assert line["shift_pct"] == pytest.approx(10.0, abs=0.5)
    assert line["new_in_ref_run_ci"] == 0 and line["new_in_ref_ci"] == line["configs"] == 6
    assert "new in ref run-only CI" in format_comparison(compare(ref, new))


def _env(cpu="AMD EPYC", fp32=215.0, bandwidth=115.0, torch="2.13.0+cpu", threads=2):
    return {"profile": "cpu", "python": "3.11", "cpu_model": cpu, "usable_cpus": 2, "gpu_name": None,
            "threads": {"torch_intra_op": threads}, "libraries": {"torch": torch, "numpy": "2.4.6"},
            "peaks": {"matmul": {"fp32": {"gflops": fp32}, "bf16": {"gflops": 4 * fp32}},
                      "bandwidth": {"gbs": bandwidth}}}


def test_the_machines_of_the_two_runs_are_compared_before_the_figures(tmp_path):
    ref = _write(tmp_path / "ref", _rows())
    new = _write(tmp_path / "new", _rows())
    (ref / "env.json").write_text(json.dumps(_env()))
    (new / "env.json").write_text(json.dumps(_env(fp32=225.0, bandwidth=105.0)))  # within 15%: one machine
    c = compare(ref, new)
    assert c.machine_differences == []
    assert "machines: the same CPU" in format_comparison(c)

    # another host: the CPU's name, a thread count, a library and two limits differ; numpy and bandwidth do not
    (new / "env.json").write_text(json.dumps(_env(cpu="Intel(R) Xeon(R) Processor", fp32=314.0, bandwidth=110.0,
                                                  torch="2.14.0+cpu", threads=1)))
    c = compare(ref, new)
    diffs = c.machine_differences
    assert diffs == ["cpu_model: 'AMD EPYC' in REF, 'Intel(R) Xeon(R) Processor' in NEW",
                     "threads: torch_intra_op 2 -> 1",
                     "libraries: torch 2.13.0+cpu -> 2.14.0+cpu",
                     "measured limits: matmul fp32 215 -> 314 GFLOP/s, matmul bf16 860 -> 1256 GFLOP/s"]
    text = format_comparison(c)
    assert "the runs' machines differ" in text and all(d in text for d in diffs)
    assert text.index("machines differ") < text.index("new median in ref CI")  # said before the table

    # the same CPU name on a slower host (or the same host far busier) is told apart by the measured limits alone
    (new / "env.json").write_text(json.dumps(_env(fp32=123.0, bandwidth=22.0)))
    c = compare(ref, new)
    assert c.machine_differences == [
        "measured limits: matmul fp32 215 -> 123 GFLOP/s, matmul bf16 860 -> 492 GFLOP/s, bandwidth 115 -> 22 GB/s"]
    text = format_comparison(c)
    assert "a limit measured at the start of each run" in text and "machines differ" not in text

    (new / "env.json").unlink()  # without one env.json the machines are not compared, and the text says so
    c = compare(ref, new)
    assert c.machine_differences is None and "machines: not compared" in format_comparison(c)
