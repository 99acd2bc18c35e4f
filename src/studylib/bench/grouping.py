"""Groups: which configurations are measured together, in which process environment, and which still need it."""

from __future__ import annotations

from collections.abc import Callable

from .. import runtimes
from ..core.config import Config
from ..stats.results import ResultsTable, measured_alike
from .plan import Plan


def process_env(configs: list[Config]) -> dict[str, str]:
    """Environment variables the process measuring `configs` starts with; raises where they need different ones."""
    backends = {c.backend for c in configs if c.backend is not None}
    if len(backends) > 1:
        raise ValueError(f"one process cannot run Keras backends {sorted(backends)} (Keras fixes it at import)")
    own = {tuple(sorted(_own_process_env(c).items())) for c in configs}
    if len(own) > 1:
        raise ValueError(f"one process cannot start with {sorted(own)} (settings fixed at process start)")
    env = dict(own.pop()) if own else {}
    if not backends:
        return env
    backend = backends.pop()
    return env | {"KERAS_BACKEND": backend} | ({"USE_TF": "0"} if backend != "tensorflow" else {})


def _own_process_env(c: Config) -> dict[str, str]:
    runtime = runtimes.REGISTRY.get(c.variant)
    return runtime.process_env(c.device) if runtime is not None else {}


def pending_groups(configs: list[Config], plan: Plan, *, table: ResultsTable, force: bool = False,
                   group_by: Callable[[Config], tuple] | None = None) -> dict[str, list[Config]]:
    """The groups a run would measure: those with a configuration not yet measured alike (all when forced)."""
    return groups_to_measure(configs, pending(configs, plan, table=table, force=force), group_by)


def pending(configs: list[Config], plan: Plan, *, table: ResultsTable, force: bool = False) -> list[Config]:
    """The configurations a run would measure: all when forced, else those without an 'ok' row measured alike."""
    if force:
        return list(configs)
    latest = table.latest()
    return [c for c in configs if not measured_alike(latest.get(c.key), plan.fingerprint, plan.settings_hash(c))]


def groups_to_measure(configs: list[Config], todo: list[Config],
                      group_by: Callable[[Config], tuple] | None = None) -> dict[str, list[Config]]:
    """Every group with a configuration to measure, whole; `group_by`: a study's own grouping (default: the shape)."""
    group_by = group_by or (lambda c: c.shape_key)

    def name(c: Config) -> str:  # as results rows carry it; a runtime with a process of its own gets its own group
        own = _own_process_env(c)
        return "|".join("" if v is None else str(v) for v in group_by(c)) + "".join(
            f"|{k}={v}" for k, v in sorted(own.items()))

    groups: dict[str, list[Config]] = {}
    for c in configs:
        groups.setdefault(name(c), []).append(c)
    wanted = {name(c) for c in todo}
    return {k: v for k, v in groups.items() if k in wanted}
