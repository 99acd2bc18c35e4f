"""Command line: `python -m studylib run|report|reanalyse|plan|profiles|summary|compare|reference|new-study`. Bad input
exits 2 with one line; a run or report of a profile that another live process is measuring exits 3 with one line naming it.

`compare REF NEW` checks whether a re-run (NEW) reproduces a reference run (REF) of the same profile.
`reference` measures the `cpu` profile from a clean commit and publishes it under reference/ (see reference.py).
`reanalyse DIR` writes DIR's pages, summary and index again from its results, measuring nothing (see reanalyse.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .bench import profiles, schemas
from .core import paths
from .machine import runlock

BUSY = 3  # exit status: another run holds the profile's lock (see runlock)
PROFILE_HELP = ("a profile: its name (params/<name>.yaml; default cpu) or the path of a YAML file, whose name (without "
                ".yaml) names its folder under outputs/")


def _plan(profile: str, overrides=()) -> int:
    from .machine.environment import detect_machine
    from .run import estimate_s, machine_speed, planned, select_notebooks

    loaded = profiles.load(profile, overrides=overrides)
    p = loaded.profile
    print(f"profile {loaded.name}: {' '.join(p.description.split())}")
    if loaded.overrides:
        print(f"overrides: {' '.join(f'--set {t}' for t in loaded.overrides)} (a profile of their own: results under "
              f"{paths.display(paths.profile_dir(loaded.name))}/, apart from {loaded.path.stem}'s)")
    if p.follows:
        print("follows: " + "; ".join(f"seed {s} ({schemas.SEEDS[s]})" for s in p.follows))
    print(f"device {p.device}, {p.threads} threads for every framework")
    if p.device == "cuda" and not detect_machine().cuda:
        print("note: this machine has no CUDA GPU, so a run here records every configuration as skipped; "
              "the times below are for the machine the profile describes")
    speed = machine_speed(p.device, p.threads, p.card)
    total = whole = 0.0
    for nb in select_notebooks(loaded, None):
        configs, todo = planned(loaded, nb)
        est, every = estimate_s(loaded, nb, todo), estimate_s(loaded, nb, configs)
        total, whole = total + est, whole + every
        print(f"\n{nb}: {len(configs)} configurations (about {every / 60:.1f} min in all), "
              f"{len(configs) - len(todo)} already measured here with these settings, about {est / 60:.1f} min "
              f"for the rest")
        left_out = getattr(loaded.sections[nb], "left_out", "")
        if left_out:
            print(f"  left out: {' '.join(left_out.split())}")
        todo_keys = {c.key for c in todo}
        for c in configs:
            print(f"  {'todo ' if c.key in todo_keys else 'done '} {c.key}")
    print(f"\nestimated total: about {whole / 60:.0f} min for the whole profile, {total / 60:.0f} min for what is "
          f"not measured yet (compile and sampling budgets, model costs scaled "
          f"{speed:.1f}x from the 2-core CPU they were measured on; real times vary by machine)")
    precise = f"{loaded.name}-precise"
    if precise in paths.known_profiles():  # the same profile with more processes: its time by the same estimate
        more = profiles.load(precise)
        every = sum(estimate_s(more, nb, planned(more, nb)[0]) for nb in select_notebooks(more, None))
        print(f"more precise: PROFILE={precise} ({more.profile.measure.replicates} processes per group instead of "
              f"{p.measure.replicates}), about {every / 60:.0f} min by the same estimate")
    return 0


def _profiles() -> int:
    for name in paths.known_profiles():
        try:
            p = profiles.load(name)
            print(f"{name:12s} {' '.join(p.profile.description.split())}")
        except profiles.ProfileError as e:
            print(f"{name:12s} INVALID: {e}")
    return 0


def _compare(ref: str, new: str, check: bool = False) -> int:
    """Print the comparison and its calibration; with `check`, exit 1 when a figure is outside calibration.LIMITS."""
    from .report.compare import CompareError, compare, format_comparison
    from .stats.calibration import format_calibration

    try:
        c = compare(Path(ref), Path(new))
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_comparison(c))
    print()
    print(format_calibration(c.calibration))
    return 1 if check and c.calibration.failures() else 0


def _with_set(command: argparse.ArgumentParser) -> None:
    command.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="override the profile (repeatable): <study>.<field> (03.batch_sizes=[1,4]) or a "
                              "profile-wide key (threads=4, measure.replicates=1); the value is YAML; results go to "
                              "outputs/<profile>+<hash of the overrides>/")


def main(argv: list[str] | None = None) -> int:
    from . import studies  # noqa: F401 - registers the built-in studies, which profiles and claims read
    parser = argparse.ArgumentParser(prog="studylib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute the profile's notebooks with papermill")
    run.add_argument("--profile", default="cpu", help=PROFILE_HELP)
    run.add_argument("--notebook", action="append", help="only this notebook (repeatable)")
    run.add_argument("--force", action="store_true", help="re-measure configurations already measured")
    run.add_argument("--report", action="store_true", help="then render the pages and the index (make report)")
    rep = sub.add_parser("report", help="render executed notebooks to HTML and write outputs/index.html")
    rep.add_argument("--profile", default="cpu", help=PROFILE_HELP)
    rean = sub.add_parser("reanalyse", help="analyse the results already in DIR again and rewrite its pages, summary "
                                            "and index, measuring nothing")
    rean.add_argument("dir", help="an outputs root (outputs, reference) or one profile's folder (reference/cpu)")
    plan = sub.add_parser("plan", help="list the configurations a run would measure, with a time estimate")
    plan.add_argument("--profile", default="cpu", help=PROFILE_HELP)
    for command in (run, rep, plan):
        _with_set(command)
    sub.add_parser("profiles", help="list the profiles and whether each is valid")
    sub.add_parser("summary", help="run the cross-hardware summary over every profile's results, render, index")
    comp = sub.add_parser("compare", help="compare a re-run's results with a reference run of the same profile")
    comp.add_argument("ref", help="the reference: a results folder (reference/cpu/results) or a profile folder")
    comp.add_argument("new", help="the re-run: a results folder or a profile folder of the same profile")
    comp.add_argument("--check", action="store_true",
                      help="exit 1 when the re-run disagrees with the intervals: mean z², |z| > 1.96, a reversed "
                           "verdict, or the binomial tests of reproduction (calibration.LIMITS)")
    refp = sub.add_parser("reference", help="measure the cpu profile (or --profile NAME) from a clean commit and "
                                            "publish it under reference/")
    refp.add_argument("--profile", default="cpu", help="the profile to measure and publish (default cpu; another "
                                                       "is published under reference/<name>/ beside it)")
    new = sub.add_parser("new-study", help="write a new study (module, notebook, smoke-profile sections) that runs at once")
    new.add_argument("name", help="two digits, an underscore and lowercase words, e.g. 07_text_generation")
    new.add_argument("--title", help="the notebook's title (default: NAME's words)")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            from .run import run as run_notebooks

            return run_notebooks(args.profile, args.notebook, force=args.force, render=args.report,
                                 overrides=args.set)
        if args.command == "report":
            from .report.render import report

            name = profiles.load(args.profile, overrides=args.set).name
            with runlock.hold(name, f"studylib report --profile {name}"):
                print(f"wrote {report(name)}")
            return 0
        if args.command == "reanalyse":
            from .reanalyse import Refused, reanalyse

            try:
                return reanalyse(args.dir)
            except Refused as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
        if args.command == "plan":
            return _plan(args.profile, args.set)
        if args.command == "compare":
            return _compare(args.ref, args.new, args.check)
        if args.command == "reference":
            from .reference import make_reference

            return make_reference(args.profile)
        if args.command == "new-study":
            from .new_study import new_study

            return new_study(args.name, args.title)
        if args.command == "summary":
            from .report.render import index, render_summary
            from .run import run_summary

            rc = run_summary()
            render_summary()
            print(f"wrote {index()}")
            return rc
        return _profiles()
    except profiles.ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except runlock.Busy as e:
        print(f"error: {e}", file=sys.stderr)
        return BUSY


if __name__ == "__main__":
    sys.exit(main())
