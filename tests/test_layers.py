"""The comparison layer is the one place speed-ups are paired, pooled, banded and judged (issue: one comparison layer);
the import graph has no circle and no module imports from a higher layer (LAYERS); no module is over 400 lines."""

import ast
import re
from pathlib import Path

import studylib
from studylib.stats import speedups
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
        froms = [n for n in ast.walk(_tree(Path(module.__file__))) if isinstance(n, ast.ImportFrom)]
        imported = {a.name for n in froms for a in n.names} | {(n.module or "").rsplit(".", 1)[-1] for n in froms}
        assert "speedups" in imported, name
        assert study.comparisons and all(isinstance(c, speedups.Comparison) for c in study.comparisons), name


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
    assert len(graph) > 50 and graph["studylib.stats.speedups"] >= {"studylib.stats.variance", "studylib.core.config"}


# The layers, lowest first, one folder each (issue 31; by idea since issue 45): a module imports only from its own
# layer or lower ones. core is the shared vocabulary; stats the numbers and their uncertainty; machine, workloads and
# runtimes what is measured on what; bench the measuring; claims the seeds' claims; studies read them; the report
# reads the studies' registry. The command line is what stays at the top of the package.
LAYERS = ["core", "stats", "machine", "workloads", "runtimes", "bench", "claims", "studies", "report", "command line"]
COMMAND_LINE = {"__main__", "gpu_check", "gpu_proof", "new_study", "notebooks", "quick", "reanalyse", "reference", "run",
                "study"}


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


# One number formatter (issue 45, item 3): a ratio, a CI or a range is formatted in core/numbers.py and nowhere else.
FORMATTER = "core/numbers.py"
# (module, text of the f-string) formats that wait for a module another change holds (listed in the note)
_NUMERIC_SPEC = re.compile(r"[efg%]$")  # .2f, ,.0f, .3g, g, .1%: a number's format spec
_SIZE = re.compile(r"\s*×\s*[a-z]{0,2}$")  # a product of two sizes: "{b}×{s}", "b{b} × s{s}"
_OLD_STYLE = re.compile(r"\{[^{}]*:[^{}]*[efg%]\}\s*×|%[-+ #0,]*\d*(?:\.\d+)?[efg]\s*×")


def _numeric(node) -> bool:
    """A replacement field with a number's format spec ({x:.2f}, {x:,.0f}, {x:.1%}; a nested {d} counts as a digit)."""
    if not isinstance(node, ast.FormattedValue) or node.format_spec is None:
        return False
    spec = "".join(p.value if isinstance(p, ast.Constant) else "0" for p in node.format_spec.values)
    return bool(_NUMERIC_SPEC.search(spec))


def _text(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _inline_formats(tree: ast.Module) -> list[tuple[int, ast.AST, str]]:
    """(line, node, what) for every ratio or CI formatted in place: a replacement field next to '×' (a product of
    two sizes, '{b}×{s}', aside), two replacement fields joined by '–' in one f-string where one has a number's format
    spec, or an old-style format ('{:.2f}×'.format, '%.2f×') followed by '×'."""
    found, inside = [], set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        values = node.values
        inside.update(id(v) for v in values)
        for i, v in enumerate(values):
            if not isinstance(v, ast.FormattedValue):
                continue
            before = _text(values[i - 1]) if i > 0 else None
            after = _text(values[i + 1]) if i + 1 < len(values) else None
            following = values[i + 2] if i + 2 < len(values) else None
            size = after is not None and _SIZE.match(after) is not None and isinstance(following, ast.FormattedValue) \
                and not (_numeric(v) or _numeric(following))
            if after is not None and after.lstrip().startswith("×") and not size:
                found.append((node.lineno, node, "a number followed by '×'"))
            elif _numeric(v) and before is not None and before.rstrip().endswith("×"):
                found.append((node.lineno, node, "'×' followed by a number"))
            if after is not None and after.strip() == "–" and isinstance(following, ast.FormattedValue) \
                    and (_numeric(v) or _numeric(following)):
                found.append((node.lineno, node, "two numbers joined by '–'"))
    for node in ast.walk(tree):
        text = _text(node)
        if text is not None and id(node) not in inside and _OLD_STYLE.search(text):
            found.append((node.lineno, node, "an old-style format followed by '×'"))
    return sorted(found, key=lambda f: f[0])


def test_the_scan_for_inline_formats_finds_each_kind():
    source = ('a = f"{x:.2f}×"\nb = f"{lo:.2f}–{hi:.2f}"\nc = "{:.1f}×".format(x)\nd = f"{b}×{s} and {b} × {s}"\n'
              'e = f"time ×{r:.2f}"\nf = f"{ratio}× and {n:,} calls"\ng = f"{lo:.1%}–{hi:.1%} of texts"\n'
              'h = f"{numbers.fmt(x)} over {n} shapes"\ni = f"b{b} × s{s}"\n')
    assert [line for line, _, _ in _inline_formats(ast.parse(source))] == [1, 2, 3, 5, 6, 7]


def test_no_ratio_or_ci_is_formatted_outside_the_formatter():
    """Every '×', CI and range on a page comes from core/numbers.py, so its digits follow its CI everywhere."""
    offences = []
    for path in _modules():
        name = path.relative_to(SRC).as_posix()
        if name == FORMATTER:
            continue
        source = path.read_text()
        for line, _node, what in _inline_formats(ast.parse(source, filename=str(path))):
            offences.append(f"{name}:{line}: {what} (use studylib.stats.numbers)")
    assert not offences, "\n".join(offences)
