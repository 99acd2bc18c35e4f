"""The comparison layer is the one place speed-ups are paired, pooled, banded and judged (issue: one comparison layer),
and the modules the studies stand on do not reach back into the studies package."""

import ast
from pathlib import Path

import studylib
from studylib import speedups
from studylib.studies import STUDIES

SRC = Path(studylib.__file__).parent
# What only the layer (speedups.py) may do: call stats' pairing and pooling, or define a band or verdict rule.
LAYER_ONLY_CALLS = {("variance", "speedup"), ("variance", "geomean_speedup")}
LAYER_ONLY_DEFS = {"classify", "noise_band", "_band", "aa_control", "pair_result", "ratio_of_ratios", "geomean_of",
                   "bh_adjust", "break_even", "break_even_calls"}
# Modules a study imports (directly or through them): none may import the studies package.
BELOW_STUDIES = ["config", "stats", "variance", "run_shift",
                 "speedups", "advice", "timing", "results", "surprises", "roofline", "sweep", "grouping", "workloads",
                 "memory", "files", "paths", "claims", "claim_registry", "dataset", "batching", "corpus",
                 "tokenization", "models", "keras_models", "profiles", "schemas", "study_registry", "gpu", "threads",
                 "environment"]


def _modules():
    return [p for p in SRC.rglob("*.py")]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def test_only_the_layer_pairs_pools_bands_and_judges():
    offences = []
    for path in _modules():
        if path.name in ("speedups.py", "variance.py"):
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                if (node.func.value.id, node.func.attr) in LAYER_ONLY_CALLS:
                    offences.append(f"{path.name}:{node.lineno} calls {node.func.value.id}.{node.func.attr}")
            if isinstance(node, ast.FunctionDef) and node.name in LAYER_ONLY_DEFS:
                offences.append(f"{path.name}:{node.lineno} defines {node.name}")
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EQUIVALENCE" for t in node.targets):
                offences.append(f"{path.name}:{node.lineno} sets EQUIVALENCE")
    assert not offences, offences


def test_every_study_uses_the_layer_and_declares_its_comparisons_as_data():
    for name, study in STUDIES.items():
        module = __import__(study.analyse.__module__, fromlist=["x"])
        imported = {a.name for n in ast.walk(_tree(Path(module.__file__))) if isinstance(n, ast.ImportFrom)
                    for a in n.names}
        assert "speedups" in imported, name
        assert study.comparisons and all(isinstance(c, speedups.Comparison) for c in study.comparisons), name


def _imports_studies(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            target = (node.module or "")
            if node.level and (target == "studies" or target.startswith("studies.")):
                lines.append(node.lineno)
            if target.startswith("studylib.studies"):
                lines.append(node.lineno)
    return lines


def test_no_module_below_the_studies_imports_them():
    offences = {m: _imports_studies(SRC / f"{m}.py") for m in BELOW_STUDIES}
    offences = {m: lines for m, lines in offences.items() if lines}
    assert not offences, offences  # they read the registry (study_registry.py), which the callers fill


MAX_LINES = 400


def test_no_module_is_over_400_lines():
    """A module holds one thing; past MAX_LINES it holds several: split it by what it holds (issue 31)."""
    lengths = {p.relative_to(SRC).as_posix(): len(p.read_text().splitlines()) for p in _modules()}
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, too_long


def _import_graph() -> dict[str, set[str]]:
    """Module -> the studylib modules it imports, at the top or inside a function (a deferred import that works
    around a circle is still a circle)."""
    def name(p: Path) -> str:
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    mods = {name(p): p for p in _modules()}
    graph = {}
    for m, p in mods.items():
        package = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        deps = set()
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                for alias in node.names:
                    deps.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[m] = {d for d in deps if d in mods and d != m}
    return graph


def test_the_import_graph_has_no_circle():
    """No module reaches itself through imports, deferred ones included (issue 31: a circle of 18 modules and
    57 imports inside functions working around it)."""
    graph, circles = _import_graph(), []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, " ; ".join(" -> ".join(c) for c in circles)
    assert len(graph) > 50 and graph["studylib.speedups"] >= {"studylib.variance", "studylib.config"}
