"""The comparison layer is the one place speed-ups are paired, pooled, banded and judged (issue: one comparison layer);
the import graph has no circle and no module imports from a higher layer (LAYERS); no module is over 400 lines."""

import ast
from pathlib import Path

import studylib
from studylib.core import speedups
from studylib.studies import STUDIES

SRC = Path(studylib.__file__).parent
# What only the layer (speedups.py) may do: call stats' pairing and pooling, or define a band or verdict rule.
LAYER_ONLY_CALLS = {("variance", "speedup"), ("variance", "geomean_speedup")}
LAYER_ONLY_DEFS = {"classify", "noise_band", "_band", "aa_control", "pair_result", "ratio_of_ratios", "geomean_of",
                   "bh_adjust", "break_even", "break_even_calls"}


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
    assert len(graph) > 50 and graph["studylib.core.speedups"] >= {"studylib.core.variance", "studylib.core.config"}


# The layers, lowest first, one folder each (issue 31): a module imports only from its own layer or lower ones. The
# claims the studies judge and the surprises a group checks sit with the measurement, below the studies that import
# them; the report reads the studies' registry. The command line is what stays at the top of the package.
LAYERS = ["core", "machine", "workloads", "runtimes", "measurement", "analysis", "studies", "report", "command line"]
COMMAND_LINE = {"__main__", "run", "study", "reference", "gpu_check", "gpu_proof", "quick", "new_study"}


def _layer(module: str) -> int:
    name = module.removeprefix("studylib.").split(".")[0]
    if name in COMMAND_LINE:
        return LAYERS.index("command line")
    assert name in LAYERS, f"{module} is in no layer: move it into one of the folders {LAYERS[:-1]}"
    return LAYERS.index(name)


def test_every_module_sits_in_a_layer_folder():
    top = {p.stem for p in SRC.glob("*.py")} - {"__init__"}
    assert top == COMMAND_LINE, top ^ COMMAND_LINE
    assert {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(LAYERS[:-1])


def test_no_module_imports_from_a_higher_layer():
    graph = _import_graph()
    upward = [f"{m} ({LAYERS[_layer(m)]}) imports {d} ({LAYERS[_layer(d)]})"
              for m, deps in graph.items() if m != "studylib" for d in sorted(deps) if _layer(d) > _layer(m)]
    assert not upward, "\n".join(upward)
