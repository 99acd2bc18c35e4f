"""Notebooks: executing one through papermill, and keeping the committed ones normalised. `python -m
studylib.notebooks [FILES]` normalises in place; `--check` lists what is not and exits 1 if anything is."""

from __future__ import annotations

import copy
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

from .core import paths

ENGINE = "studylib"  # papermill's nbclient engine, reporting each cell as it starts


def _register_engine() -> None:
    from papermill.engines import NBClientEngine, papermill_engines

    class CellReportingEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, on_cell=None, **kwargs):
            if on_cell is not None:
                cell_start = nb_man.cell_start

                def reporting(cell, cell_index=None, **kw):
                    if cell_index is not None:
                        on_cell(cell_index + 1, len(nb_man.nb.cells))
                    return cell_start(cell, cell_index, **kw)

                nb_man.cell_start = reporting
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register(ENGINE, CellReportingEngine)


def execute(source: Path, out: Path, params: dict, *, kernel_name: str,
            on_cell: Callable[[int, int], None] | None = None) -> None:
    """Execute `source` into `out` with `params` (kernel over Unix sockets); `on_cell` gets (cell, cells)."""
    import papermill as pm
    from traitlets.config import Config

    _register_engine()
    with tempfile.TemporaryDirectory(prefix="studylib-kernel-") as sockets:
        local = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "kernel")}})
        pm.execute_notebook(str(source), str(out), parameters=params, kernel_name=kernel_name,
                            cwd=str(Path(source).parent), progress_bar=False, log_output=False, engine_name=ENGINE,
                            config=local, on_cell=on_cell)


def problems(path: Path) -> list[str]:
    """What keeps a committed notebook from being normalised: schema errors, cells without an id, outputs."""
    import nbformat

    raw = nbformat.reader.reads(Path(path).read_text())  # as stored: read() would add ids and hide their absence
    found = []
    if (raw.get("nbformat"), raw.get("nbformat_minor", 0)) < (4, 5):
        found.append(f"nbformat {raw.get('nbformat')}.{raw.get('nbformat_minor')} (cell ids need 4.5)")
    found += [f"cell {i} has no id" for i, c in enumerate(raw.get("cells", [])) if "id" not in c]
    found += [f"cell {i} has outputs" for i, c in enumerate(raw.get("cells", []))
              if c.get("outputs") or c.get("execution_count") is not None]
    with warnings.catch_warnings():  # a missing id is listed above, not warned about
        warnings.simplefilter("ignore", nbformat.validator.MissingIDFieldWarning)
        try:
            nbformat.validate(copy.deepcopy(raw), version=4)
        except nbformat.ValidationError as e:
            found.append(f"invalid: {e.message}")
    return found


def normalise(path: Path) -> bool:
    """Every cell an id (`c<index>` where missing), nbformat 4.5, outputs cleared; written only if changed (returned)."""
    import nbformat

    path = Path(path)
    text = path.read_text()
    nb = nbformat.reader.reads(text)
    nb["nbformat"], nb["nbformat_minor"] = 4, max(5, nb.get("nbformat_minor", 0))
    taken = {c["id"] for c in nb["cells"] if "id" in c}
    for i, cell in enumerate(nb["cells"]):
        if "id" not in cell:
            n, cell_id = i, f"c{i:02d}"
            while cell_id in taken:
                n += 1
                cell_id = f"c{n:02d}"
            cell["id"] = cell_id
            taken.add(cell_id)
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    new = nbformat.writes(nbformat.from_dict(nb), version=4)
    new = new if new.endswith("\n") else new + "\n"
    if new == text:
        return False
    path.write_text(new)
    return True


def committed() -> list[Path]:
    """The notebooks under notebooks/."""
    return sorted(paths.NOTEBOOKS_DIR.glob("*.ipynb"))  # read when called: tests point it elsewhere


def main(argv: list[str]) -> int:
    check = "--check" in argv
    files = [Path(a) for a in argv if a != "--check"] or committed()
    bad = 0
    for path in files:
        if check:
            for problem in problems(path):
                print(f"{path}: {problem}")
                bad += 1
        elif normalise(path):
            print(f"normalised {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
