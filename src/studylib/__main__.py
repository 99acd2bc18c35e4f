"""Command line: `python -m studylib run|report|plan|profiles`. Bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import sys

from . import paths, profiles


def _plan(profile: str) -> int:
    from .run import planned, select_notebooks
    from .studies import STUDIES

    loaded = profiles.load(profile)
    print(f"profile {loaded.name}: {' '.join(loaded.profile.description.split())}")
    total = 0.0
    for nb in select_notebooks(loaded, None):
        configs, todo = planned(loaded, nb)
        measure = loaded.measure_for(nb).model_dump()
        est = sum(STUDIES[nb].estimate_s(c, measure) for c in todo)
        total += est
        print(f"\n{nb}: {len(configs)} configurations, {len(configs) - len(todo)} already measured here with "
              f"these settings, about {est / 60:.1f} min for the rest")
        left_out = getattr(loaded.sections[nb], "left_out", "")
        if left_out:
            print(f"  left out: {' '.join(left_out.split())}")
        todo_keys = {c.key for c in todo}
        for c in configs:
            print(f"  {'todo ' if c.key in todo_keys else 'done '} {c.key}")
    print(f"\nestimated total: about {total / 60:.1f} min (compile and sampling budgets; real times vary by machine)")
    return 0


def _profiles() -> int:
    for name in paths.known_profiles():
        try:
            p = profiles.load(name)
            print(f"{name:12s} {' '.join(p.profile.description.split())}")
        except profiles.ProfileError as e:
            print(f"{name:12s} INVALID: {e}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="studylib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute the profile's notebooks with papermill")
    run.add_argument("--profile", default="cpu")
    run.add_argument("--notebook", action="append", help="only this notebook (repeatable)")
    run.add_argument("--force", action="store_true", help="re-measure configurations already measured")
    rep = sub.add_parser("report", help="render executed notebooks to HTML and write outputs/index.html")
    rep.add_argument("--profile", default="cpu")
    plan = sub.add_parser("plan", help="list the configurations a run would measure, with a time estimate")
    plan.add_argument("--profile", default="cpu")
    sub.add_parser("profiles", help="list the profiles and whether each is valid")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            from .run import run as run_notebooks

            return run_notebooks(args.profile, args.notebook, force=args.force)
        if args.command == "report":
            from .render import report

            print(f"wrote {report(profiles.load(args.profile).name)}")
            return 0
        if args.command == "plan":
            return _plan(args.profile)
        return _profiles()
    except profiles.ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
