"""Peer agreement: each runtime timed ALONE, by a minimal loop of its own, against the harness's median.

For one shape per study, every runtime runs in a process of its own, started with that framework's default threading
but the thread count (OMP_NUM_THREADS and torch.set_num_threads; TensorFlow's intra- and inter-op pools; ONNX
Runtime's intra_op_num_threads; JAX has no exact setting), with OMP_WAIT_POLICY removed from its environment (never
set). The model is rebuilt here from its transformers config (the same values and dtype as the study's spec, random
weights from a fixed seed, nothing downloaded); nothing of studylib is imported, for timing or for models. PyTorch is
timed with torch.utils.benchmark.Timer.blocked_autorange, TensorFlow, ONNX Runtime and JAX with timeit; every timed
call returns its result on the host (TensorFlow's `.numpy()`, ONNX Runtime's numpy outputs, Keras's predict_on_batch;
PyTorch on a CPU returns when the work is done). Then it reads a harness results folder and prints, per runtime, the
standalone median (95% CI of the median, IQR), the harness's median (its 95% CI), their ratio and whether it lies
within 5% (1/1.05 to 1.05, the study's equivalence band). A runtime that cannot run here, or an export that fails, is
a row with its status, never dropped.

    .venv/bin/python benchmarks/peer_agreement.py --results outputs/cpu/results          # every study, ~10 s a runtime
    .venv/bin/python benchmarks/peer_agreement.py --studies 02,07 --results reference/cpu/results
    .venv/bin/python benchmarks/peer_agreement.py --quick --studies 02 --runtimes eager   # a smoke check

What each study's loop does, and how it maps onto the harness's rows (variant names, shape keys): `--list`, and
docs/reproducibility.md ("Peer agreement").
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BAND = 1.05  # within 5%: 1/BAND <= harness / standalone <= BAND (the study's ±5% equivalence band)
SEED = 0
NOTEBOOKS = {"01": "01_eager_vs_compiled", "02": "02_torchscript_vs_xla", "03": "03_onnx_batching",
             "05": "05_keras_backends", "07": "07_text_generation"}

# The transformers configs of the study's model registry (src/studylib/workloads/models.py), copied as values
BERT_BASE: dict = {}  # BertConfig's defaults: bert-base-uncased's shape
DISTILROBERTA_CLASSIFIER = dict(vocab_size=8000, num_labels=2, num_hidden_layers=6)  # RobertaConfig
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, max_position_embeddings=8192,
                    rope_theta=100000.0)  # LlamaConfig
RESNET_50: dict = {}  # ResNetConfig's defaults: microsoft/resnet-50's shape
# Study 03's data (params/cpu.yaml): 32 paragraphs of pydoc topics, BPE of 8,000 tokens, cut at 128 tokens
PASS = dict(n_texts=32, vocab_size=8000, max_length=128)
# Study 07's decode step (params/cpu.yaml): prompt 64, 32 new tokens, the step at prompt + half the new tokens
DECODE = dict(prompt=64, new_tokens=32)


@dataclass(frozen=True)
class Runtime:
    """One standalone measurement: a study's shape in one runtime, and the harness rows it is held against."""

    study: str
    runtime: str  # the harness's variant name
    framework: str  # torch, tensorflow, onnxruntime or keras-jax: how the child times it and which env it gets
    shape: str  # for people
    match: dict  # the harness row's shape key (results columns), variant and threads added at matching
    harness: tuple[dict, ...] = ({},)  # extra keys per harness row it is held against (e.g. each Keras backend)
    export: str | None = None  # a model file made first in a process of its own (ONNX), cached
    what: str = ""

    @property
    def key(self) -> str:
        return f"{self.study}:{self.runtime}"

    @property
    def measurement(self) -> str:
        """What is timed: two runtimes with the same measurement share one standalone result (01's and 05's eager)."""
        return json.dumps({"f": self.framework, "r": self.runtime, "m": self.match}, sort_keys=True)


_R50 = dict(model="resnet-50", dtype="fp32", batch_size=1, image_size=224)
_BERT8 = dict(model="bert-base", dtype="fp32", batch_size=1, seq_len=8)
_PASS03 = dict(model="distilroberta-classifier", dtype="fp32", batch_size=1, seq_len=128, strategy="unsorted",
               data="pydoc-topics:n32:bpe8000:max128")
_DEC07 = dict(model="smollm2-135m", dtype="fp32", batch_size=1, seq_len=64, strategy="decode", data="new32")
R50_SHAPE, BERT_SHAPE = "resnet-50 fp32 b1 224px", "bert-base fp32 b1×8"
PASS_SHAPE = "distilroberta-classifier b1, pass over 32 texts"
DEC_SHAPE = "smollm2-135m fp32 b1 decode step at 80 (prompt 64 + 16)"

RUNTIMES: tuple[Runtime, ...] = (
    Runtime("01", "eager", "torch", R50_SHAPE, _R50,
            what="transformers ResNetForImageClassification(ResNetConfig()), logits on one 3×224×224 image"),
    Runtime("01", "compile-default", "torch", R50_SHAPE, _R50,
            what="the same model through torch.compile (default mode), compiled in the first call"),
    Runtime("02", "eager", "torch", BERT_SHAPE, _BERT8,
            what="transformers BertModel(BertConfig()), last hidden state, 8 token ids and an all-ones mask"),
    Runtime("02", "torchscript", "torch", BERT_SHAPE, _BERT8,
            what="the same model torch.jit.trace'd on its inputs, then torch.jit.freeze"),
    Runtime("02", "tf-function", "tensorflow", BERT_SHAPE, _BERT8,
            what="transformers TFBertModel(BertConfig()) in a tf.function, output copied to the host (.numpy())"),
    Runtime("02", "tf-xla", "tensorflow", BERT_SHAPE, _BERT8,
            what="the same with tf.function(jit_compile=True): XLA"),
    Runtime("03", "eager", "torch", PASS_SHAPE, _PASS03,
            what="RobertaForSequenceClassification (6 layers, 8,000 tokens), one call per text, 32 texts a pass"),
    Runtime("03", "ort", "onnxruntime", PASS_SHAPE, _PASS03, export="onnx-classifier",
            what="the same model exported by torch.onnx.export (TorchScript exporter, opset 17, dynamic batch and "
                 "sequence), one InferenceSession.run per text"),
    Runtime("05", "eager", "torch", R50_SHAPE, _R50,
            harness=({"backend": "torch"}, {"backend": "tensorflow"}, {"backend": "jax"}),
            what="native eager ResNet-50 as in study 01 (one standalone measurement, held against the harness's eager "
                 "in each Keras backend's processes)"),
    Runtime("05", "keras-jax-jit", "keras-jax", R50_SHAPE, _R50, harness=({"backend": "jax"},),
            what="keras.applications.ResNet50(weights=None, classifier_activation=None) on KERAS_BACKEND=jax, "
                 "compile(jit_compile=True), predict_on_batch on a 1×224×224×3 array"),
    Runtime("07", "eager", "torch", DEC_SHAPE, _DEC07,
            what="LlamaForCausalLM of SmolLM2-135M's shape, a DynamicCache prefilled with 80 tokens; one step of one "
                 "token, its argmax, the cache cropped back to 80"),
    Runtime("07", "ort", "onnxruntime", DEC_SHAPE, _DEC07, export="optimum-llama",
            what="optimum's ORTModelForCausalLM exported from the same random model; one step from the same past "
                 "(80 positions), its argmax"),
)


# ---------------------------------------------------------------------------------------------------------------------
# The pure part: statistics of a sample, matching the harness's rows, the table


def median_ci(samples: list[float], level: float = 0.95) -> tuple[float, float, float, float, float]:
    """(median, CI low, CI high, first quartile, third quartile) of `samples`. The CI is the distribution-free one of
    the median (order statistics at the binomial(n, 1/2) quantiles); below 6 samples it is the sample's range."""
    x = sorted(samples)
    n = len(x)
    if n == 0:
        return (math.nan,) * 5

    def quantile(q: float) -> float:
        pos = q * (n - 1)
        lo = math.floor(pos)
        return x[lo] + (x[min(lo + 1, n - 1)] - x[lo]) * (pos - lo)

    med = quantile(0.5)
    if n < 6:
        return med, x[0], x[-1], quantile(0.25), quantile(0.75)
    alpha = (1 - level) / 2
    cdf, j = 0.0, 0
    while j < n:  # the largest j with P(B <= j - 1) <= alpha: x[j - 1] (1-based rank j) is the lower bound
        p = math.comb(n, j) / 2**n
        if cdf + p > alpha:
            break
        cdf += p
        j += 1
    j = max(j, 1)
    return med, x[j - 1], x[n - j], quantile(0.25), quantile(0.75)


def geometric(values: list[float]) -> tuple[float, float, float]:
    """(geometric mean, 95% CI low, high) of positive `values`: t over their logs (one value: that value, no CI)."""
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    if len(logs) == 1:
        return math.exp(mean), math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1))
    half = _T975.get(len(logs) - 1, 1.96) * sd / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def pooled(process_samples: list[list[float]]) -> dict:
    """A standalone result over one or more processes: the geometric mean of the processes' medians (the harness's
    median is that over its replicates) with its CI (one process: the median's order-statistic CI; several: t over the
    processes' log medians), the quartiles of all samples, and the per-process medians."""
    meds = [median_ci(s)[0] for s in process_samples if s]
    every = [v for s in process_samples for v in s]
    if not meds:
        return {"median_s": None, "ci_low_s": None, "ci_high_s": None, "q1_s": None, "q3_s": None, "n": 0,
                "process_medians_s": []}
    _, lo, hi, q1, q3 = median_ci(every)
    med, lo, hi = median_ci(process_samples[0])[:3] if len(meds) == 1 else geometric(meds)
    return {"median_s": med, "ci_low_s": lo, "ci_high_s": hi, "q1_s": q1, "q3_s": q3, "n": len(every),
            "process_medians_s": meds}


_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def within(ratio: float | None, band: float = BAND) -> bool | None:
    """Whether harness / standalone lies within the band (1/band to band); None where there is no ratio."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return None
    return 1 / band <= ratio <= band


def _norm(value):
    """A results-table cell or a matcher's value, comparable: '' and NaN are None, integral numbers are ints."""
    if value is None:
        return None
    if isinstance(value, str):
        s = value.strip()
        if s == "":
            return None
        try:
            value = float(s)
        except ValueError:
            return s
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() else value
    return value


def read_results(folder: Path, notebook: str) -> list[dict] | None:
    """The harness's rows of one notebook (`<folder>/<notebook>.csv`), or None where the file is missing."""
    path = Path(folder) / f"{notebook}.csv"
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def match_rows(rows: list[dict], want: dict) -> list[dict]:
    """The rows whose columns equal every key of `want` (normalised: 128.0 is 128, an empty cell is None)."""
    want = {k: _norm(v) for k, v in want.items()}
    return [r for r in rows if all(_norm(r.get(k)) == v for k, v in want.items())]


def harness_row(rows: list[dict] | None, rt: Runtime, extra: dict, threads: int) -> dict:
    """The harness's median for one runtime's shape: {status, median_s, ci_low_s, ci_high_s, config_key, note}."""
    want = rt.match | extra | {"variant": rt.runtime, "threads": threads, "device": "cpu"}
    if rows is None:
        return {"status": "missing", "note": f"no {NOTEBOOKS[rt.study]}.csv in the results folder"}
    found = match_rows(rows, want)
    if not found:
        return {"status": "missing", "note": "no harness row for " + ", ".join(f"{k}={v}" for k, v in want.items())}
    if len(found) > 1:
        return {"status": "ambiguous", "note": f"{len(found)} harness rows match"}
    r = found[0]
    out = {"status": r.get("status") or "?", "config_key": r.get("config_key"), "replicates": _norm(r.get("replicates")),
           "real_tokens": _norm(r.get("real_tokens")), "n_texts": _norm(r.get("n_texts"))}
    for k in ("median_s", "ci_low_s", "ci_high_s"):
        v = _norm(r.get(k))
        out[k] = float(v) if isinstance(v, int | float) else None
    if out["status"] == "ok" and out["median_s"] is None:
        out["status"] = "no median"
    if out["status"] != "ok":
        out["note"] = (r.get("error") or "")[:200]
    return out


def build_rows(selected: list[Runtime], standalone: dict[str, dict], results: Path, threads: int) -> list[dict]:
    """One table row per (runtime, harness row it is held against): the standalone result by runtime key (its
    status, pooled timing and notes, see `pooled`), the harness's median, their ratio and the 5% rule."""
    cache: dict[str, list[dict] | None] = {}
    table = []
    for rt in selected:
        nb = NOTEBOOKS[rt.study]
        if nb not in cache:
            cache[nb] = read_results(results, nb)
        s = standalone.get(rt.key) or {"status": "not run"}
        for extra in rt.harness:
            h = harness_row(cache[nb], rt, extra, threads)
            ratio = None
            if s.get("status") == "ok" and h.get("status") == "ok" and s.get("median_s"):
                ratio = h["median_s"] / s["median_s"]
            problem = None if h.get("status") == "ok" else f"harness {h.get('status')}"
            table.append(table_row(rt, extra, s, h, ratio, problem))
    return table


def table_row(rt: Runtime, extra: dict, s: dict, h: dict, ratio: float | None, problem: str | None, **more) -> dict:
    """One row of the table: the standalone result `s` and harness result `h` of `rt` at harness key `extra`, their
    ratio and the 5% rule; its status the standalone's failure, else `problem` (the harness side's), else ok."""
    status = f"standalone {s.get('status')}" if s.get("status") != "ok" else problem or "ok"
    label = rt.runtime + "".join(f" ({k} {v})" for k, v in extra.items())
    return {"study": rt.study, "notebook": NOTEBOOKS[rt.study], "shape": rt.shape, "runtime": label,
            "variant": rt.runtime, "harness_key": extra, "status": status, "standalone": s, "harness": h,
            "ratio": ratio, **more, "within_5pct": within(ratio)}


def _ms(v) -> str:
    if v is None or not isinstance(v, int | float) or not math.isfinite(v):
        return "–"
    v *= 1e3
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def markdown(table: list[dict]) -> str:
    """The table as markdown: one line per row; statuses and notes in a last column."""
    head = ("| study | shape | runtime | standalone median, ms [95% CI] (IQR) | n | harness median, ms [95% CI] | "
            "harness / standalone | within 5 % | status |")
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table:
        s, h = r["standalone"], r["harness"]
        sa = "–"
        if s.get("median_s") is not None:
            sa = (f"{_ms(s['median_s'])} [{_ms(s.get('ci_low_s'))}–{_ms(s.get('ci_high_s'))}] "
                  f"({_ms(s.get('q1_s'))}–{_ms(s.get('q3_s'))})")
        ha = "–"
        if h.get("median_s") is not None:
            ha = f"{_ms(h['median_s'])} [{_ms(h.get('ci_low_s'))}–{_ms(h.get('ci_high_s'))}]"
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "–"
        low, high = r.get("ratio_ci") or (None, None)
        if r["ratio"] is not None and low is not None and math.isfinite(low):
            ratio += f" [{low:.3f}–{high:.3f}]"
        ok = {True: "yes", False: "**no**", None: "–"}[r["within_5pct"]]
        why = r["status"]
        note = s.get("error") or (h.get("note") if h.get("status") != "ok" else "") or ""
        if note:
            why += f": {note}"
        why = why.replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {r['study']} | {r['shape']} | {r['runtime']} | {sa} | {s.get('n') or '–'} | {ha} | {ratio} | "
                     f"{ok} | {why} |")
    return "\n".join(lines)


CSV_COLUMNS = ["study", "shape", "runtime", "variant", "status", "standalone_median_s", "standalone_ci_low_s",
               "standalone_ci_high_s", "standalone_q1_s", "standalone_q3_s", "standalone_n", "standalone_processes",
               "first_call_s", "harness_median_s", "harness_ci_low_s", "harness_ci_high_s", "harness_status",
               "harness_config_key", "ratio", "within_5pct", "note"]


def csv_rows(table: list[dict]) -> list[dict]:
    out = []
    for r in table:
        s, h = r["standalone"], r["harness"]
        out.append({"study": r["study"], "shape": r["shape"], "runtime": r["runtime"], "variant": r["variant"],
                    "status": r["status"], "standalone_median_s": s.get("median_s"),
                    "standalone_ci_low_s": s.get("ci_low_s"), "standalone_ci_high_s": s.get("ci_high_s"),
                    "standalone_q1_s": s.get("q1_s"), "standalone_q3_s": s.get("q3_s"), "standalone_n": s.get("n"),
                    "standalone_processes": len(s.get("process_medians_s") or []),
                    "first_call_s": s.get("first_call_s"), "harness_median_s": h.get("median_s"),
                    "harness_ci_low_s": h.get("ci_low_s"), "harness_ci_high_s": h.get("ci_high_s"),
                    "harness_status": h.get("status"), "harness_config_key": h.get("config_key"),
                    "ratio": r["ratio"], "within_5pct": r["within_5pct"],
                    "note": s.get("error") or h.get("note") or ""})
    return out


def write_outputs(out: Path, table: list[dict], meta: dict) -> list[Path]:
    """`out` as JSON (every field, and `meta`) and the table as CSV beside it (same name, .csv); or the reverse when
    `out` ends in .csv. Returns the paths written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path = out if out.suffix != ".csv" else out.with_suffix(".json")
    csv_path = out.with_suffix(".csv")
    json_path.write_text(json.dumps({"meta": meta, "rows": table}, indent=1, default=str) + "\n")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(csv_rows(table))
    return [json_path, csv_path]


def select(studies: list[str], runtimes: list[str] | None) -> list[Runtime]:
    """The runtimes of the studies asked, in the table's order; `runtimes` (variant names, or study:variant) narrows
    them. An unknown study or runtime is a ValueError naming the known ones."""
    unknown = [s for s in studies if s not in NOTEBOOKS]
    if unknown:
        raise ValueError(f"unknown study {', '.join(unknown)} (known: {', '.join(NOTEBOOKS)})")
    chosen = [rt for rt in RUNTIMES if rt.study in studies]
    if runtimes:
        names = set(runtimes)
        chosen = [rt for rt in chosen if rt.runtime in names or rt.key in names]
        known = {rt.runtime for rt in RUNTIMES} | {rt.key for rt in RUNTIMES}
        if names - known:
            raise ValueError(f"unknown runtime {', '.join(sorted(names - known))} (known: {', '.join(sorted(known))})")
    return chosen


# ---------------------------------------------------------------------------------------------------------------------
# Study 03's pass: the same 32 texts, tokenized the same way (re-done here from its description, not imported)


def pass_ids(cache: Path, n_texts: int = PASS["n_texts"], vocab_size: int = PASS["vocab_size"],
             max_length: int = PASS["max_length"], seed: int = SEED) -> list[list[int]]:
    """Token ids of study 03's sample in its given order: the paragraphs of pydoc_data.topics (topics sorted, split
    at blank lines, whitespace collapsed, two words or more), a fixed-seed permutation's first n_texts, a byte-level
    BPE trained on every paragraph (RoBERTa's specials, <s> … </s>), each text cut at max_length. Cached as JSON."""
    import re
    from pydoc_data.topics import topics

    texts = []
    for key in sorted(topics):
        for para in re.split(r"\n[ \t]*\n", topics[key]):
            para = " ".join(para.split())
            if len(para.split()) >= 2:
                texts.append(para)
    import numpy as np
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    digest = hashlib.sha256(f"{n_texts}|{vocab_size}|{max_length}|{seed}|{tokenizers.__version__}|".encode()
                            + "\0".join(texts).encode()).hexdigest()[:16]
    path = Path(cache) / f"pass03-{digest}.json"
    if path.is_file():
        return json.loads(path.read_text())
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", 2), cls=("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    tok.enable_truncation(max_length)
    picked = np.random.default_rng(seed).permutation(len(texts))[:n_texts]
    ids = [e.ids for e in tok.encode_batch([texts[int(i)] for i in picked])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ids))
    return ids


# ---------------------------------------------------------------------------------------------------------------------
# The children: one process per runtime. Everything below runs in the child; each imports only its framework.


def _quiet():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("transformers", "optimum", "torch.onnx", "tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _torch_model(study: str, threads: int, compiled: bool = False, scripted: bool = False, ids=None):
    """(call, notes) for a PyTorch runtime; called under torch.inference_mode."""
    import torch
    import transformers

    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)
    if study in ("01", "05"):
        model = transformers.ResNetForImageClassification(transformers.ResNetConfig(**RESNET_50)).eval()
        x = torch.randn(1, 3, 224, 224, generator=g)
        fn = torch.compile(model) if compiled else model
        return (lambda: fn(pixel_values=x).logits), f"attention n/a; compiled={compiled}"
    if study == "02":
        config = transformers.BertConfig(**BERT_BASE)
        model = transformers.BertModel(config).eval()
        ids = torch.randint(0, config.vocab_size, (1, 8), generator=g)
        mask = torch.ones_like(ids)
        notes = f"attention {config._attn_implementation}"
        if scripted:
            class First(torch.nn.Module):
                def __init__(self, m):
                    super().__init__()
                    self.m = m

                def forward(self, i, a):
                    return self.m(input_ids=i, attention_mask=a, return_dict=False)[0]

            frozen = torch.jit.freeze(torch.jit.trace(First(model).eval(), (ids, mask), check_trace=False))
            return (lambda: frozen(ids, mask)), notes + "; traced and frozen"
        return (lambda: model(input_ids=ids, attention_mask=mask).last_hidden_state), notes
    if study == "03":
        config = transformers.RobertaConfig(**DISTILROBERTA_CLASSIFIER)
        model = transformers.RobertaForSequenceClassification(config).eval()
        batches = [(torch.tensor([x]), torch.ones(1, len(x), dtype=torch.long)) for x in ids]
        return (lambda: [model(input_ids=i, attention_mask=a).logits for i, a in batches]), (
            f"attention {config._attn_implementation}; {len(batches)} calls a pass, {sum(map(len, ids))} tokens")
    if study == "07":
        config = transformers.LlamaConfig(**SMOLLM2_135M)
        lm = transformers.LlamaForCausalLM(config).eval()
        ctx = DECODE["prompt"] + DECODE["new_tokens"] // 2
        tokens = torch.randint(0, 8000, (1, ctx + 1), generator=g)
        cache = transformers.DynamicCache(config=config)
        lm(input_ids=tokens[:, :ctx], past_key_values=cache, use_cache=True)
        token = tokens[:, ctx:]

        def step():
            out = lm(input_ids=token, past_key_values=cache, use_cache=True)
            cache.crop(ctx)  # back to the context: every call is the same step
            return out.logits[:, -1].argmax(-1)

        return step, f"attention {config._attn_implementation}; DynamicCache at {ctx} positions"
    raise ValueError(study)


def _tf_model(threads: int, xla: bool):
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import transformers

    tf.random.set_seed(SEED)
    config = transformers.BertConfig(**BERT_BASE)
    model = transformers.TFBertModel(config)
    rng = np.random.default_rng(SEED)
    ids = tf.constant(rng.integers(0, config.vocab_size, (1, 8)), dtype=tf.int64)
    mask = tf.ones_like(ids)
    fn = tf.function(lambda i, a: model(input_ids=i, attention_mask=a, training=False)[0], jit_compile=xla)
    notes = (f"intra_op={tf.config.threading.get_intra_op_parallelism_threads()} "
             f"inter_op={tf.config.threading.get_inter_op_parallelism_threads()}; jit_compile={xla}")
    return (lambda: fn(ids, mask).numpy()), notes


def _ort_session(path: str, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _ort_model(study: str, threads: int, model_path: str, ids=None):
    import numpy as np

    if study == "03":
        session = _ort_session(model_path, threads)
        names = [i.name for i in session.get_inputs()]
        feeds = []
        for x in ids:
            arrays = {"input_ids": np.array([x], dtype=np.int64), "attention_mask": np.ones((1, len(x)), dtype=np.int64)}
            feeds.append({n: arrays[n] for n in names})
        return (lambda: [session.run(None, f)[0] for f in feeds]), (
            f"inputs {', '.join(names)}; intra_op_num_threads={threads}, else ONNX Runtime's defaults")
    if study == "07":
        import onnxruntime as ort
        import torch
        from optimum.onnxruntime import ORTModelForCausalLM

        torch.set_num_threads(threads)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        model = ORTModelForCausalLM.from_pretrained(model_path, session_options=options, use_cache=True,
                                                    provider="CPUExecutionProvider")
        ctx = DECODE["prompt"] + DECODE["new_tokens"] // 2
        tokens = torch.randint(0, 8000, (1, ctx + 1), generator=torch.Generator().manual_seed(SEED))
        out = model(input_ids=tokens[:, :ctx], attention_mask=torch.ones(1, ctx, dtype=torch.long),
                    position_ids=torch.arange(ctx).unsqueeze(0), use_cache=True)
        past, token = out.past_key_values, tokens[:, ctx:]
        mask, position = torch.ones(1, ctx + 1, dtype=torch.long), torch.tensor([[ctx]])

        def step():  # ONNX Runtime returns new present tensors: the past it is given stays as it was
            o = model(input_ids=token, attention_mask=mask, past_key_values=past, position_ids=position, use_cache=True)
            return o.logits[:, -1].argmax(-1)

        return step, f"optimum ORTModelForCausalLM, intra_op_num_threads={threads}; past of {ctx} positions"
    raise ValueError(study)


def _keras_jax_model(threads: int):
    import keras
    import numpy as np

    keras.utils.set_random_seed(SEED)
    model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classifier_activation=None)
    model.compile(jit_compile=True)
    x = np.random.default_rng(SEED).standard_normal((1, 224, 224, 3), dtype="float32")
    import jax

    return (lambda: model.predict_on_batch(x)), (
        f"backend {keras.backend.backend()}; jax {jax.__version__} on {jax.device_count()} device(s); XLA:CPU sizes its "
        f"own pool (no exact thread count: {threads} asked, {os.cpu_count()} cores)")


def export_child(spec: dict) -> dict:
    """Make (or find cached) the model file a runtime loads: {"path", "seconds", "cached"}."""
    _quiet()
    import torch
    import transformers

    torch.set_num_threads(spec["threads"])
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    if spec["export"] == "onnx-classifier":
        import onnx

        versions["onnx"] = onnx.__version__
    else:
        from importlib.metadata import version

        import optimum.onnxruntime  # noqa: F401

        versions["optimum-onnx"] = version("optimum-onnx") if _has_dist("optimum-onnx") else version("optimum")
    key = hashlib.sha256(json.dumps([spec["export"], versions, SEED], sort_keys=True).encode()).hexdigest()[:16]
    folder = Path(spec["cache"]) / f"{spec['export']}-{key}"
    meta = folder / "meta.json"
    if meta.is_file():
        return json.loads(meta.read_text()) | {"cached": True}
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    t0 = time.perf_counter()
    torch.manual_seed(SEED)
    if spec["export"] == "onnx-classifier":
        model = transformers.RobertaForSequenceClassification(
            transformers.RobertaConfig(**DISTILROBERTA_CLASSIFIER)).eval()

        class Logits(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, attention_mask):
                return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]

        # the example: two texts padded into one batch (a real padding mask, as the study's export sees)
        ids = torch.randint(5, 8000, (2, 16), generator=torch.Generator().manual_seed(SEED))
        mask = torch.ones_like(ids)
        ids[0, 6:], mask[0, 6:] = 1, 0
        axes = {0: "batch", 1: "seq"}
        with torch.no_grad():
            torch.onnx.export(Logits(model), (ids, mask), str(tmp / "model.onnx"), dynamo=False, opset_version=17,
                              do_constant_folding=True, input_names=["input_ids", "attention_mask"],
                              output_names=["logits"], dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                                                     "logits": {0: "batch"}})
        path = tmp / "model.onnx"
    else:
        from optimum.onnxruntime import ORTModelForCausalLM

        lm = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMOLLM2_135M)).eval()
        with tempfile.TemporaryDirectory(prefix="peer-lm-") as saved:
            lm.save_pretrained(saved)
            ORTModelForCausalLM.from_pretrained(saved, export=True, use_cache=True).save_pretrained(tmp)
        path = tmp
    seconds = time.perf_counter() - t0
    final_path = folder / path.relative_to(tmp) if path != tmp else folder
    info = {"path": str(final_path), "seconds": seconds, "versions": versions}
    (tmp / "meta.json").write_text(json.dumps(info))
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    os.rename(tmp, folder)
    return info | {"cached": False}


def _has_dist(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(name)
        return True
    except PackageNotFoundError:
        return False


def time_child(spec: dict) -> dict:
    """Prepare one runtime, time its first call alone, warm it up, then time it: per-call samples in seconds."""
    _quiet()
    study, name, threads = spec["study"], spec["runtime"], spec["threads"]
    framework = spec["framework"]
    t0 = time.perf_counter()
    ids = spec.get("ids")
    if framework == "torch":
        import torch

        context = torch.inference_mode()
        context.__enter__()
        call, notes = _torch_model(study, threads, compiled=name.startswith("compile"),
                                   scripted=name == "torchscript", ids=ids)
    elif framework == "tensorflow":
        call, notes = _tf_model(threads, xla=name == "tf-xla")
    elif framework == "onnxruntime":
        call, notes = _ort_model(study, threads, spec["model_path"], ids=ids)
    elif framework == "keras-jax":
        call, notes = _keras_jax_model(threads)
    else:
        raise ValueError(framework)
    prepare_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    call()
    first_call_s = time.perf_counter() - t0
    for _ in range(spec["warmup"]):
        call()
    seconds, min_samples = spec["seconds"], spec["min_samples"]
    if framework == "torch":
        import torch.utils.benchmark as benchmark

        # num_threads: the Timer sets torch's threads for the measurement and defaults to ONE thread
        m = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=threads).blocked_autorange(
            min_run_time=seconds)
        samples, number = list(m.times), m.number_per_run
        while len(samples) < min_samples:  # a call longer than the budget: more blocks, as few as asked
            more = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=threads).timeit(number)
            samples.extend(more.times)
        method = f"torch.utils.benchmark.Timer.blocked_autorange(min_run_time={seconds:g}), {number} call(s) a block"
        threads_in_force = {"torch_intra_op": torch.get_num_threads(), "torch_inter_op": torch.get_num_interop_threads()}
    else:
        import timeit

        timer = timeit.Timer(call)  # timeit switches the garbage collector off while it times
        single = timer.timeit(1)
        number = max(1, math.ceil(1e-3 / max(single, 1e-9)))  # blocks of at least 1 ms (one call at these shapes)
        samples, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds or len(samples) < min_samples:
            samples.append(timer.timeit(number) / number)
        method = f"timeit, {number} call(s) a block, {seconds:g} s"
        threads_in_force = {}
    return {"samples_s": samples, "calls_per_sample": number, "prepare_s": prepare_s, "first_call_s": first_call_s,
            "notes": notes, "method": method,
            "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
                                                   "KERAS_BACKEND", "USE_TF", "USE_TORCH", *KEPT_MEMORY)} | threads_in_force,
            "python": sys.version.split()[0], "pid": os.getpid(),
            # which frameworks this process holds (one alone, but where a wrapper needs another: optimum takes torch)
            "frameworks_loaded": [m for m in ("torch", "tensorflow", "jax", "onnxruntime", "keras") if m in sys.modules]}


# ---------------------------------------------------------------------------------------------------------------------
# The parent: one child process per runtime (and per export), then the table


KEPT_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def child_env(framework: str, threads: int, glibc_defaults: bool = False) -> dict[str, str]:
    """The environment a runtime's process starts with: this one's, OMP_WAIT_POLICY removed (OpenMP's default then
    holds), the thread count in OMP_NUM_THREADS, which frameworks transformers and Keras load, and glibc's mmap and
    trim thresholds at 1 GiB (freed memory kept, what docs/method.md tells a user to set to get what the harness
    times) unless `glibc_defaults`."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", *KEPT_MEMORY)}
    if not glibc_defaults:
        env |= KEPT_MEMORY
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["TRANSFORMERS_VERBOSITY"] = "error"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env.pop("PYTHONPATH", None)  # nothing of the harness (src/studylib) on the path
    if framework == "tensorflow":
        env.update(USE_TF="1", USE_TORCH="0")
    else:
        env.update(USE_TF="0")
    if framework == "keras-jax":
        env["KERAS_BACKEND"] = "jax"
    return env


def run_child(mode: str, spec: dict, framework: str, threads: int, timeout: float, glibc_defaults: bool = False) -> dict:
    """Run this file as a child (`--child-mode mode`) with `spec`; its RESULT line, or {"status": ..., "error": ...}."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        spec_path = f.name
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child-mode", mode, "--child-spec",
                               spec_path], capture_output=True, text=True, env=child_env(framework, threads, glibc_defaults),
                              timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"{mode} did not finish within {timeout:.0f} s"}
    finally:
        os.unlink(spec_path)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-3:]
    return {"status": "error", "error": f"{mode} exited {proc.returncode}: " + " / ".join(tail)[-400:]}


def child_main(mode: str, spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    try:
        result = (export_child if mode == "export" else time_child)(spec)
        result = {"status": "ok"} | result
    except ImportError as exc:
        result = {"status": "skipped", "error": f"{type(exc).__name__}: {exc}"[:400]}
    except Exception as exc:  # a failed export or run is a row with its status
        result = {"status": "error", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def prepare(selected: list[Runtime], args, log=print) -> tuple[list[list[int]] | None, dict[str, dict]]:
    """What the loops need made first: study 03's token ids and every export (each in a process of its own, cached)."""
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    ids = None
    if any(rt.study == "03" for rt in selected):
        ids = pass_ids(cache)
        log(f"study 03's pass: {len(ids)} texts, {sum(map(len, ids))} tokens")
    exports: dict[str, dict] = {}
    for name in dict.fromkeys(rt.export for rt in selected if rt.export):
        t0 = time.perf_counter()
        exports[name] = run_child("export", {"export": name, "threads": args.threads, "cache": str(cache)}, "torch",
                                  args.threads, args.export_timeout)
        log(f"export {name}: {exports[name].get('status')} ({time.perf_counter() - t0:.0f} s"
            f"{', cached' if exports[name].get('cached') else ''}) {exports[name].get('error') or ''}")
    return ids, exports


def time_loop(rt: Runtime, args, ids, exports: dict[str, dict]) -> dict:
    """One process of `rt`'s loop: its RESULT (status, samples_s, notes), or the export's failure as its status."""
    if rt.export and exports[rt.export].get("status") != "ok":
        return {"status": "error", "error": "export failed: " + str(exports[rt.export].get("error"))}
    spec = {"study": rt.study, "runtime": rt.runtime, "framework": rt.framework, "threads": args.threads,
            "seconds": args.seconds, "warmup": args.warmup, "min_samples": args.min_samples,
            "ids": ids if rt.study == "03" else None,
            "model_path": exports[rt.export].get("path") if rt.export else None}
    return run_child("time", spec, rt.framework, args.threads, args.timeout, args.glibc_defaults)


def _loop_line(rt: Runtime, r: dict, where: str, seconds: float) -> str:
    med = median_ci(r.get("samples_s") or [])[0]
    return (f"  {rt.key:22s} {where}: {r.get('status')} {'' if math.isnan(med) else f'{med * 1e3:.2f} ms '}"
            f"({seconds:.0f} s){' ' + r['error'] if r.get('error') else ''}")


def standalone_result(rt: Runtime, runs: list[dict], exports: dict[str, dict], first: Runtime,
                      ids=None) -> dict:
    """The standalone result of `rt` from its processes' RESULTs: pooled timing and the first process's notes, or the
    first failure's status where none is ok."""
    ok = [r for r in runs if r.get("status") == "ok"]
    if not ok:
        bad = runs[0] if runs else {"status": "not run"}
        return {"status": bad.get("status"), "error": bad.get("error"), "n": 0}
    res = pooled([r["samples_s"] for r in ok]) | {"status": "ok"}
    res |= {k: ok[0].get(k) for k in ("method", "notes", "env", "calls_per_sample", "python", "frameworks_loaded")}
    res["samples_s"] = [r["samples_s"] for r in ok]  # per process, seconds per call (per pass in study 03)
    res["first_call_s"] = [r["first_call_s"] for r in ok]
    res["prepare_s"] = [r["prepare_s"] for r in ok]
    if len(ok) < len(runs):
        res["error"] = f"{len(runs) - len(ok)} of {len(runs)} processes failed: {runs[0].get('error')}"
    if rt.export:
        res["export"] = {k: exports[rt.export].get(k) for k in ("seconds", "cached", "versions")}
    if first is not rt:
        res["shared_with"] = first.key  # the same loop, measured once (05's eager is 01's)
    if rt.study == "03" and ids:
        res["pass_tokens"] = sum(map(len, ids))
    return res


def firsts(selected: list[Runtime]) -> dict[str, Runtime]:
    """The runtime that stands for each distinct measurement (two runtimes with one loop share one measurement)."""
    return {m: next(rt for rt in selected if rt.measurement == m) for m in dict.fromkeys(rt.measurement
                                                                                          for rt in selected)}


def measure(selected: list[Runtime], args, log=print) -> dict[str, dict]:
    """Every selected runtime timed in processes of its own (`--processes` each, round robin over the runtimes), the
    exports made first; the standalone result per runtime key (status, pooled timing, the processes' notes)."""
    ids, exports = prepare(selected, args, log)
    first = firsts(selected)
    measurements: dict[str, list[dict]] = {}
    for p in range(args.processes):
        for m, rt in first.items():
            t0 = time.perf_counter()
            r = time_loop(rt, args, ids, exports)
            measurements.setdefault(m, []).append(r)
            log(_loop_line(rt, r, f"process {p + 1}/{args.processes}", time.perf_counter() - t0))
    return {rt.key: standalone_result(rt, measurements[rt.measurement], exports, first[rt.measurement], ids)
            for rt in selected}


# ---------------------------------------------------------------------------------------------------------------------
# Interleaved (--rounds K): the harness re-run beside the loops, round by round, in random order. The host drifts by
# more than the 5% band between runs tens of minutes apart, so a harness median from another hour is not held against
# a loop timed now: each round times every loop once (a process each) and re-runs each study's harness, on the peer
# shape only, in a process of its own (`studylib run` on the harness's profile cut to that shape).

HARNESS_SHAPES: dict[str, dict] = {  # per study: its profile section's fields cut to the peer shape (see RUNTIMES)
    "01": {"models": ["resnet-50"], "dtypes": ["fp32"], "batch_sizes": [1]},
    "02": {"models": ["bert-base"], "dtypes": ["fp32"], "batch_sizes": [1], "seq_lens": [8], "micro_ops": None},
    "03": {"dtypes": ["fp32"], "batch_sizes": [1]},
    "05": {"models": ["resnet-50"], "dtypes": ["fp32"], "batch_sizes": [1]},
    "07": {"dtypes": ["fp32"], "batch_sizes": [1], "seq_lens": [64]},
}


def harness_profile(raw: dict, study: str, variants: list[str]) -> dict:
    """The harness's profile (its YAML as a mapping) cut to one study at its peer shape: eager and `variants` only, no
    A/A copy, one replicate; per-variant settings of the variants left out dropped. Everything else (measurement
    settings, threads, seed) stays the profile's."""
    nb = NOTEBOOKS[study]
    section = dict(raw["notebooks"][nb]) | HARNESS_SHAPES[study]
    section["variants"] = list(dict.fromkeys(["eager", *variants]))
    section["aa"] = []
    section = {k: v for k, v in section.items() if v is not None}
    for key in ("variant_skip", "variant_phases"):
        if isinstance(section.get(key), dict):
            section[key] = {v: s for v, s in section[key].items() if v in section["variants"]}

    def applies(skip: dict) -> bool:  # a skip must still leave something out of the cut grid (the profile checks it)
        return all(v in section[f"{k}s"] for k, v in skip.items() if isinstance(section.get(f"{k}s"), list))

    for key in ("skip", "vision_only_skip"):
        if isinstance(section.get(key), list):
            section[key] = [s for s in section[key] if applies(s)]
    for key in ("variant_skip", "phase_skip"):
        if isinstance(section.get(key), dict):
            section[key] = {k: [s for s in v if applies(s)] for k, v in section[key].items()}
            section[key] = {k: v for k, v in section[key].items() if v}
    if isinstance(section.get("measure"), dict) and "replicates" in section["measure"]:
        section["measure"] = section["measure"] | {"replicates": 1}
    out = {k: v for k, v in raw.items() if k not in ("notebooks", "follows", "extends")}
    out["description"] = f"{raw.get('description', '')} Cut to study {study}'s peer-agreement shape.".strip()
    out["measure"] = dict(raw.get("measure") or {}) | {"replicates": 1}
    out["notebooks"] = {nb: section}
    return out


def run_harness(study: str, variants: list[str], raw: dict, folder: Path, timeout: float, cache: Path) -> dict:
    """One harness run of `study` at its peer shape, in its own process and outputs folder: {status, results (the
    results folder), seconds, error}. `studylib run` starts its workers as it always does; its exports are kept in
    `cache` for the next rounds (an export is a first call, never timed)."""
    import yaml

    name = f"peer-{study}"
    folder.mkdir(parents=True, exist_ok=True)
    profile = folder / f"{name}.yaml"
    profile.write_text(yaml.safe_dump(harness_profile(raw, study, variants), sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env |= {"STUDYLIB_OUTPUTS": str(folder / "out"), "STUDYLIB_CACHE": str(cache)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "studylib", "run", "--profile", str(profile), "--notebook",
                               NOTEBOOKS[study]], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"the harness did not finish within {timeout:.0f} s"}
    results = folder / "out" / name / "results"
    if proc.returncode != 0 or not (results / f"{NOTEBOOKS[study]}.csv").is_file():
        tail = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()][-3:]
        return {"status": "error", "error": f"studylib run exited {proc.returncode}: " + " / ".join(tail)[-400:]}
    return {"status": "ok", "results": str(results), "seconds": time.perf_counter() - t0}


def interleaved(selected: list[Runtime], args, raw: dict, log=print) -> tuple[list[dict], list[dict]]:
    """`args.rounds` rounds; each runs every distinct loop (a process each) and each study's harness (a process
    each) once, in a fresh random order (seeded by --seed). (the table, one record per round)."""
    import random

    ids, exports = prepare(selected, args, log)
    first = firsts(selected)
    studies = list(dict.fromkeys(rt.study for rt in selected))
    rng = random.Random(args.seed)
    rounds = []
    for k in range(args.rounds):
        jobs = [("harness", s) for s in studies] + [("loop", m) for m in first]
        rng.shuffle(jobs)
        record = {"round": k + 1, "order": [], "loops": {}, "harness": {}}
        for kind, what in jobs:
            t0 = time.perf_counter()
            if kind == "harness":
                variants = [rt.runtime for rt in selected if rt.study == what]
                h = run_harness(what, variants, raw, Path(args.cache).parent / "rounds" / f"round{k + 1}" / what,
                                args.harness_timeout, Path(args.cache) / "harness")
                record["harness"][what] = h
                record["order"].append(f"harness {what}")
                log(f"  round {k + 1}: harness of study {what}: {h['status']} ({time.perf_counter() - t0:.0f} s)"
                    f"{' ' + h['error'] if h.get('error') else ''}")
            else:
                rt = first[what]
                r = time_loop(rt, args, ids, exports)
                record["loops"][what] = r
                record["order"].append(rt.key)
                log(_loop_line(rt, r, f"round {k + 1}", time.perf_counter() - t0))
        rounds.append(record)
    return paired_rows(selected, rounds, exports, ids, args.threads), rounds


def paired_rows(selected: list[Runtime], rounds: list[dict], exports: dict[str, dict], ids, threads: int) -> list[dict]:
    """The table of interleaved rounds: per (runtime, harness row), the standalone result pooled over the rounds'
    processes, the harness's rounds summarised alike (geometric mean, t CI over rounds), and the ratio as the
    geometric mean of the rounds' own ratios (each round's harness over the same round's loop), with its CI."""
    first = firsts(selected)
    read: dict[str, list[dict] | None] = {}

    def rows(folder: str, notebook: str) -> list[dict] | None:  # each round's harness results read once
        if folder not in read:
            read[folder] = read_results(Path(folder), notebook)
        return read[folder]

    table = []
    for rt in selected:
        nb = NOTEBOOKS[rt.study]
        loops = [r["loops"].get(rt.measurement, {"status": "not run"}) for r in rounds]
        s = standalone_result(rt, loops, exports, first[rt.measurement], ids)
        for extra in rt.harness:
            pairs, hs, notes = [], [], []
            for record, loop in zip(rounds, loops):
                run = record["harness"].get(rt.study, {"status": "not run"})
                h = (harness_row(rows(run["results"], nb), rt, extra, threads) if run["status"] == "ok"
                     else {"status": run["status"], "note": run.get("error")})
                if h.get("status") != "ok":
                    notes.append(f"round {record['round']}: harness {h.get('status')} {h.get('note') or ''}".strip())
                    continue
                hs.append(h["median_s"])
                med = median_ci(loop.get("samples_s") or [])[0] if loop.get("status") == "ok" else math.nan
                if math.isfinite(med) and med > 0:
                    pairs.append(h["median_s"] / med)
            harness = {"status": "ok" if hs else "missing", "rounds_s": hs, "note": "; ".join(notes)}
            if hs:
                harness["median_s"], harness["ci_low_s"], harness["ci_high_s"] = geometric(hs)
            ratio = ratio_low = ratio_high = None
            if pairs:
                ratio, ratio_low, ratio_high = geometric(pairs)
            problem = None if pairs else "harness missing" if not hs else "no paired round"
            table.append(table_row(rt, extra, s, harness, ratio, problem, ratio_ci=[ratio_low, ratio_high],
                                   paired_rounds=len(pairs)))
    return table


def default_threads(results: Path) -> int:
    """The harness's thread count, from its env.json (torch's intra-op threads), else 2 (params/cpu.yaml)."""
    try:
        return int(json.loads((Path(results) / "env.json").read_text())["threads"]["torch_intra_op"])
    except (OSError, KeyError, ValueError, TypeError):
        return 2


def harness_env(results: Path) -> dict:
    try:
        env = json.loads((Path(results) / "env.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: env.get(k) for k in ("profile", "captured_at", "cpu_model", "logical_cpus", "git_commit", "threads",
                                    "fingerprint")}


QUIET_LOAD = 0.25  # a 1-minute load average above this many per core at the start: the run warns


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _fmt_load(v) -> str:
    return "?" if v is None else f"{v:.2f}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def check_pass(table: list[dict]) -> None:
    """Study 03: where the standalone pass's tokens differ from the harness row's real_tokens, say so in its note."""
    for r in table:
        s, h = r["standalone"], r["harness"]
        if r["study"] == "03" and s.get("pass_tokens") and h.get("real_tokens") not in (None, s["pass_tokens"]):
            h["note"] = (h.get("note") or "") + (f" the harness's pass holds {h['real_tokens']} tokens, this one "
                                                 f"{s['pass_tokens']}: not the same pass")
            r["status"] += " (pass differs)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="outputs/cpu/results", help="a harness results folder (default %(default)s)")
    ap.add_argument("--studies", default=",".join(NOTEBOOKS), help="comma-separated (default %(default)s)")
    ap.add_argument("--runtimes", default="", help="only these variants (eager,tf-xla or 02:eager)")
    ap.add_argument("--threads", type=int, default=None, help="default: the results' env.json, else 2")
    ap.add_argument("--seconds", type=float, default=None, help="timed seconds per runtime and process (default 10)")
    ap.add_argument("--processes", type=int, default=1, help="independent processes per runtime (default 1)")
    ap.add_argument("--quick", action="store_true", help="a smoke check: 1 s per runtime, one warm-up call")
    ap.add_argument("--out", help="JSON, and a CSV beside it (default outputs/peer_agreement/peer_agreement.json)")
    ap.add_argument("--cache", help="exports and study 03's token ids (default outputs/peer_agreement/cache)")
    ap.add_argument("--glibc-defaults", action="store_true",
                    help="the loops with glibc's own mmap and trim thresholds (default: 1 GiB each, as the harness times)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per timing process")
    ap.add_argument("--export-timeout", type=float, default=1200, help="seconds per export process")
    ap.add_argument("--rounds", type=int, default=0, help="interleaved: K rounds, each re-running every study's "
                    "harness on its peer shape beside one process of every loop, in random order (default: no rounds, "
                    "the harness's medians read from --results)")
    ap.add_argument("--profile", help="with --rounds: the harness's profile, a name under params/ or a YAML file "
                    "(default: the one --results was measured with, else cpu)")
    ap.add_argument("--seed", type=int, default=SEED, help="with --rounds: the order's random seed (default %(default)s)")
    ap.add_argument("--harness-timeout", type=float, default=1800, help="seconds per harness run (with --rounds)")
    ap.add_argument("--list", action="store_true", help="print what each runtime's loop does and its harness rows")
    ap.add_argument("--child-mode", choices=["time", "export"], help=argparse.SUPPRESS)
    ap.add_argument("--child-spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_mode:
        return child_main(args.child_mode, args.child_spec)
    try:
        selected = select([s.strip() for s in args.studies.split(",") if s.strip()],
                          [r.strip() for r in args.runtimes.split(",") if r.strip()] or None)
    except ValueError as exc:
        print(f"peer_agreement: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for rt in selected:
            for extra in rt.harness:
                want = rt.match | extra | {"variant": rt.runtime}
                print(f"{rt.study} {rt.runtime:16s} {rt.framework:12s} harness row: "
                      + ", ".join(f"{k}={v}" for k, v in want.items()))
            print(f"   {rt.what}")
        return 0
    results = Path(args.results)
    if not results.is_absolute():
        results = Path.cwd() / results
    args.threads = args.threads or default_threads(results)
    args.seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 10.0)
    args.warmup = 1 if args.quick else 3
    args.min_samples = 3 if args.quick else 10
    args.out = Path(args.out).resolve() if args.out else ROOT / "outputs" / "peer_agreement" / "peer_agreement.json"
    args.cache = Path(args.cache).resolve() if args.cache else ROOT / "outputs" / "peer_agreement" / "cache"
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    inherited = os.environ.get("OMP_WAIT_POLICY")
    print(f"peer agreement: {len(selected)} runtimes, {args.threads} threads, {args.seconds:g} s each, "
          f"{args.processes} process(es) each; OMP_WAIT_POLICY "
          f"{'unset' if inherited is None else f'{inherited} here, removed in the runtimes’ processes'}; "
          f"harness results {results}", file=sys.stderr)
    load_before = _load()
    if load_before is not None and load_before > QUIET_LOAD * (os.cpu_count() or 1):
        print(f"warning: the 1-minute load average is {load_before:.2f} on {os.cpu_count()} cores: the machine is not "
              f"quiet, and OpenMP's default (spinning) threads lose most where another process takes a core",
              file=sys.stderr)
    t0 = time.perf_counter()
    henv = harness_env(results)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    rounds = None
    if args.rounds > 0:
        import yaml

        name = args.profile or henv.get("profile") or "cpu"
        path = Path(name) if name.endswith((".yaml", ".yml")) else ROOT / "params" / f"{name}.yaml"
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            print(f"peer_agreement: --profile {name}: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        missing = [s for s in dict.fromkeys(rt.study for rt in selected) if NOTEBOOKS[s] not in raw.get("notebooks", {})]
        if missing:
            print(f"peer_agreement: --profile {name}: no section for study {', '.join(missing)} in {path}",
                  file=sys.stderr)
            return 2
        table, rounds = interleaved(selected, args, raw, log=log)
        henv = henv | {"profile": name, "harness": f"re-run in each of {args.rounds} rounds from {path.name}"}
    else:
        table = build_rows(selected, measure(selected, args, log=log), results, args.threads)
    check_pass(table)
    meta = {"started": started, "seconds_total": time.perf_counter() - t0, "argv": sys.argv[1:],
            "threads": args.threads, "seconds_per_runtime": args.seconds, "processes": args.processes,
            "quick": args.quick, "band": BAND, "host": {"cpu_model": _cpu_model(), "logical_cpus": os.cpu_count(),
                                                          "python": sys.version.split()[0]},
            "omp_wait_policy_inherited": inherited, "load_average_1min": {"start": load_before, "end": _load()},
            "results": str(results), "harness_env": henv, "rounds": rounds}
    paths = write_outputs(args.out, table, meta)
    against = (f"the harness re-run beside the loops in each of {args.rounds} interleaved rounds (profile "
               f"{henv.get('profile')} cut to each study's peer shape; ratio: geometric mean of the rounds' ratios, "
               f"95% CI over rounds)" if rounds else
               f"the harness's results in `{args.results}` (profile {henv.get('profile')}, measured "
               f"{henv.get('captured_at')} on {henv.get('cpu_model')}, harness threads "
               f"{json.dumps(henv.get('threads'))})")
    print(f"\nStandalone (each runtime alone in its own process, {args.threads} threads, OMP_WAIT_POLICY unset) against "
          f"{against}; this host: {meta['host']['cpu_model']}, {started}, 1-minute load average {_fmt_load(load_before)} at the "
          f"start and {_fmt_load(meta['load_average_1min']['end'])} at the end.\n")
    print(markdown(table))
    print(f"\n{sum(r['within_5pct'] is True for r in table)} of {len(table)} rows within 5%; "
          f"{sum(r['status'] != 'ok' for r in table)} without a ratio. Written: {', '.join(map(str, paths))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
