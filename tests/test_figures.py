"""The report's figures: one colour per variant across figures, no empty panel, the A/A control as a noise band,
dots for a single x, readable log ticks, heat-map text that contrasts with its cell."""

import typing

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from studylib.report import palette, plots  # noqa: E402
from studylib.stats import verdicts  # noqa: E402
from studylib.studies import STUDIES  # noqa: E402
from studylib.studies import eager_vs_compiled as s01  # noqa: E402

rng = np.random.default_rng(1)


def _row(model, variant, dtype, batch, median):
    samples = list(rng.normal(median, median * 0.01, 40))
    text = model.startswith("bert")
    return {"model": model, "variant": variant, "dtype": dtype, "batch_size": batch, "seq_len": 16 if text else None,
            "image_size": None if text else 32, "device": "cpu", "status": "ok", "error": "", "samples_s": samples,
            "median_s": float(np.median(samples)), "first_call_s": median * 3, "warmup_calls": 1, "n": 40,
            "ci_low_s": median * 0.98, "ci_high_s": median * 1.02, "prepare_s": 0.0, "max_abs_diff": 1e-7,
            "parity_ok": True, "peak_mem_mb": None}


@pytest.fixture
def results():
    """Study 01's shapes: fp32 at batch 1, 4 and 8 for both models, bf16 only for resnet at batch 1 (so a full
    model × dtype grid would have an empty bert · bf16 panel)."""
    rows = []
    for model, dtype, batches in (("resnet-tiny", "fp32", (1, 4, 8)), ("bert-tiny", "fp32", (1, 4, 8)),
                                  ("resnet-tiny", "bf16", (1,))):
        for b in batches:
            rows += [_row(model, "eager", dtype, b, 0.010 * b), _row(model, "eager-aa", dtype, b, 0.010 * b),
                     _row(model, "compile-default", dtype, b, 0.006 * b)]
            if model == "resnet-tiny":
                rows.append(_row(model, "eager-channels-last", dtype, b, 0.008 * b))
    return pd.DataFrame(rows)


def _figures(df):
    df = df.assign(workload=df.model)
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df)).assign(workload=lambda t: t.model)
    latency = plots.lines_with_ci(df, x="batch_size", y="median_s", lo="ci_low_s", hi="ci_high_s", hue="variant",
                                  row="workload", col="dtype", scale=1e3, logy=True)
    gains = plots.speedup_points(sp, row="workload", col="dtype")
    return latency, gains


def _data_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def _series_colours(ax) -> dict[str, tuple]:
    """Colour of every labelled series on `ax` (plain lines and error-bar points)."""
    out = {ln.get_label(): matplotlib.colors.to_rgb(ln.get_color()) for ln in ax.get_lines()
           if not ln.get_label().startswith("_")}
    for c in ax.containers:
        if c.get_label() and not c.get_label().startswith("_"):
            out[c.get_label()] = matplotlib.colors.to_rgb(c.lines[0].get_color())
    return out


def _has_data(ax) -> bool:
    return bool(_series_colours(ax)) or any(np.isfinite(np.asarray(im.get_array(), float)).any() for im in ax.images)


def test_one_study_figures_keep_each_variant_colour_and_have_no_empty_axes(results):
    latency, gains = _figures(results)
    seen: dict[str, set] = {}
    for fig in (latency, gains):
        axes = _data_axes(fig)
        assert len(axes) == 3  # resnet fp32, resnet bf16, bert fp32: no empty bert · bf16 panel
        for ax in axes:
            assert _has_data(ax), ax.get_title()
            for label, rgb in _series_colours(ax).items():
                seen.setdefault(label, set()).add(rgb)
    assert {"eager", "compile-default", "eager-channels-last"} <= set(seen)
    for label, colours in seen.items():
        assert colours == {matplotlib.colors.to_rgb(palette.colour(label))}, label


def test_the_band_drawn_is_the_verdicts_band_and_the_aa_copy_is_no_variant(results):
    from studylib.stats.speedups import EQUIVALENCE

    _, gains = _figures(results)
    labels = {lb for ax in gains.axes for lb in ax.get_legend_handles_labels()[1]}
    assert plots.BAND_LABEL in labels and "eager-aa" not in labels
    for ax in _data_axes(gains):  # the ±5% band behind every panel's points, and one y scale with 1 on it
        [band] = [p for p in ax.patches if p.get_label() == plots.BAND_LABEL]
        ys = (band.get_y(), band.get_y() + band.get_height())
        assert min(ys) == pytest.approx(1 / EQUIVALENCE) and max(ys) == pytest.approx(EQUIVALENCE)
        assert ax.get_ylim() == _data_axes(gains)[0].get_ylim() and ax.get_ylim()[0] < 1 < ax.get_ylim()[1]


def test_a_single_x_value_is_drawn_as_dots_not_a_line(results):
    latency, _ = _figures(results)
    [single] = [ax for ax in latency.axes if ax.get_title() == "resnet-tiny · bf16"]
    assert single.containers and all(c.lines[0].get_linestyle() == "None" for c in single.containers)
    [sweep] = [ax for ax in latency.axes if ax.get_title() == "resnet-tiny · fp32"]
    assert sweep.get_lines()[0].get_linestyle() == "-"


def test_a_narrow_log_axis_gets_at_least_three_labels():
    fig, ax = matplotlib.pyplot.subplots()
    ax.plot([1, 2], [1.02, 1.3])
    ax.set_yscale("log")
    plots._log_ticks(ax.yaxis, *ax.get_ylim())
    fig.canvas.draw()
    assert len([t for t in ax.get_yticklabels() if t.get_text()]) >= 3


def test_heatmap_text_contrasts_and_missing_cells_are_hatched():
    sp = pd.DataFrame([
        {"model": "m", "pair": "p", "seq_len": 8, "batch_size": 1, "speedup": 6.0, "ci_low": 5.5, "ci_high": 6.5,
         "status": "ok"},
        {"model": "m", "pair": "p", "seq_len": 64, "batch_size": 1, "speedup": 1.01, "ci_low": 0.99, "ci_high": 1.03,
         "status": "ok"},
        {"model": "m", "pair": "p", "seq_len": 8, "batch_size": 4, "speedup": np.nan, "ci_low": np.nan,
         "ci_high": np.nan, "status": "oom"},
    ])  # batch 4 × seq 64 never ran
    fig = plots.heatmap(sp, row="pair", col="model")
    [ax] = _data_axes(fig)
    colour = {t.get_text().split("\n")[0]: matplotlib.colors.to_rgb(t.get_color()) for t in ax.texts}
    assert colour["6.00×"] == (1.0, 1.0, 1.0) and colour["1.01×"] == (0.0, 0.0, 0.0)
    assert {"oom", "not run"} <= set(colour)
    assert len([p for p in ax.patches if p.get_hatch()]) == 2


def test_every_known_name_has_its_own_colour():
    from studylib.core.config import AA, is_aa
    from studylib.runtimes import REGISTRY

    copies = {n for n in REGISTRY if is_aa(n)}  # every A/A copy is the noise grey, eager-aa's colour
    assert {palette.colour(n) for n in copies} == {palette.PALETTE[AA]}
    names = (set(REGISTRY) - copies) | {AA}
    for study in STUDIES.values():
        for name in ("variants", "strategies"):
            field = study.section.model_fields.get(name)
            for arg in typing.get_args(field.annotation) if field else ():
                names |= set(typing.get_args(arg))
    names -= {None}
    assert names <= set(palette.PALETTE), names - set(palette.PALETTE)
    known = [palette.PALETTE[n] for n in names - {"unsorted"}]  # study 04's baseline shares eager's near-black
    assert len(set(known)) == len(known)
    assert palette.colour("eager @jax") == palette.colour("eager") != palette.colour("eager-aa")


def test_a_long_table_shows_its_first_rows_and_folds_the_rest_with_its_csv():
    import base64
    import re

    from studylib.report import tables

    long = pd.DataFrame({"variant": [f"v{i}" for i in range(98)], "median": range(98)})
    page = tables.folded(long, "02_measurements").data
    shown, rest = page.split("<details", 1)
    # each row once: the first rows, then the others folded (a table printed twice was a page fault)
    assert shown.count("<tr") == 1 + tables.SHOWN_ROWS and rest.count("<tr") == 1 + 98 - tables.SHOWN_ROWS
    assert f"The other {98 - tables.SHOWN_ROWS} rows" in rest and "rows ×" not in page and "..." not in page
    assert "<td>v0</td>" in shown and "<td>v0</td>" not in rest and "<td>v97</td>" in rest
    csv = re.search(r'download="02_measurements.csv" href="data:text/csv;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(csv).decode().splitlines()[-1] == "v97,97"
    assert "<details" not in tables.folded(long.head(5), "short").data


def test_the_aa_control_gets_no_panel_of_its_own(results):
    df = results.assign(strategy="unsorted", texts_s=100.0, lo=90.0, hi=110.0)
    fig = plots.lines_with_ci(df, x="batch_size", y="texts_s", lo="lo", hi="hi", hue="strategy", row="model",
                              col="variant")
    titles = {ax.get_title() for ax in _data_axes(fig)}
    assert "resnet-tiny · eager" in titles and not any("eager-aa" in t for t in titles)


def test_a_figure_says_what_it_shows_in_its_alt_text_and_a_kernel_stores_it_beside_the_png(results):
    df = results.assign(workload=results.model)
    fig = plots.lines_with_ci(df, x="batch_size", y="median_s", lo="ci_low_s", hi="ci_high_s", hue="variant",
                              row="workload", col="dtype", scale=1e3, logy=True, xlabel="batch size",
                              ylabel="latency per call (ms)", title="Latency by batch size",
                              caption="Lower is faster; a band is the 95% CI of the median.")
    alt = plots.alt_text(fig)
    assert alt.startswith("Latency by batch size. latency per call (ms) against batch size. 3 panels: ")
    assert "resnet-tiny · bf16" in alt and alt.endswith("Lower is faster; a band is the 95% CI of the median.")

    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib.figure import Figure

    shell = InteractiveShell.instance()
    png = shell.display_formatter.formatters["image/png"]
    png.for_type(Figure, lambda f: b"\x89PNG fake")  # what the inline backend registers
    plots.install()
    plots.install()  # twice (a re-run start cell): still one wrapper
    data, metadata = png(fig)
    assert data == b"\x89PNG fake" and metadata == {"alt": alt}
    matplotlib.pyplot.close(fig)
