"""Walk the fit job's arguments: which package functions receive the ``FitArgs`` (or one of its option groups, or the
problem record built from them), in the order a fit calls them, and how often the walk climbs back up a layer.

A *stop* is a call of a package function that gets the fit's options object (``FitArgs`` or one of its nested
configs, or a record holding one of them: the ``ProblemRecord`` of ``FitArgs.problem``) as an argument; consecutive
calls of the same function are one stop. A stop *climbs* when its module sits
in a higher layer than the stop before it (the layers of ``benchmarks/import_graph.py``). ``fit_job.py`` revisits
count how often the walk comes back to ``jobs/fit_job.py`` after leaving it. Measured on a CI-size fit of one
bundled run with the fit's default groups (nothing is timed)::

    python benchmarks/arg_walk.py            # the summary
    python benchmarks/arg_walk.py --stops    # and every stop
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from import_graph import LAYERS, layer_of  # noqa: E402


def _layer(rel: str) -> str:
    """The layer of a module given as a path relative to the package."""
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return layer_of(".".join(parts))

PKG_DIR = REPO / "source" / "isaaclab_sysid" / "isaaclab_sysid"


def _option_objects(args) -> set[int]:
    """ids of the options object and every nested dataclass in it."""
    out, todo = set(), [args]
    while todo:
        o = todo.pop()
        if id(o) in out:
            continue
        out.add(id(o))
        todo += [getattr(o, f.name) for f in dataclasses.fields(o) if dataclasses.is_dataclass(getattr(o, f.name))]
    return out


def _holds(value, ids: set[int]) -> bool:
    """``value`` is one of the options objects, or a dataclass holding one (the problem record of its sections)."""
    if id(value) in ids:
        return True
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)
            and any(id(getattr(value, f.name)) in ids for f in dataclasses.fields(value)))


def walk(argv: list[str]) -> list[tuple[str, str]]:
    """(module path relative to the package, function) of every stop, in call order."""
    import tyro

    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_job import run_fit

    args = tyro.cli(FitArgs, args=argv, use_underscores=True)
    stops: list[tuple[str, str]] = []
    pkg = str(PKG_DIR)

    def prof(frame, event, _arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(pkg):
            return
        ids = _option_objects(args)  # --resume may swap the object: re-read every call (cheap at this size)
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if any(_holds(frame.f_locals.get(n), ids) for n in names):
            stop = (str(Path(code.co_filename).relative_to(pkg)), code.co_name)
            if not stops or stops[-1] != stop:
                stops.append(stop)

    sys.setprofile(prof)
    try:
        run_fit(args, log=lambda s: None)
    finally:
        sys.setprofile(None)
    return stops


def summarize(stops: list[tuple[str, str]]) -> dict:
    """Stops, files, climbs and fit_job.py revisits of a walk."""
    layers = [LAYERS.index(_layer(f)) for f, _ in stops]
    climbs = sum(1 for a, b in zip(layers, layers[1:]) if b > a)
    in_job = [f == "jobs/fit_job.py" for f, _ in stops]
    revisits = sum(1 for a, b in zip(in_job, in_job[1:]) if b and not a)
    return {"stops": len(stops), "files": len({f for f, _ in stops}), "climbs": climbs, "fit_job_revisits": revisits}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stops", action="store_true", help="print every stop")
    ap.add_argument("--fit_groups", default="auto", help="the fit's groups (default: auto, the fit's default)")
    a = ap.parse_args()
    run = str(REPO / "data" / "real_runs" / "twin_chirp_low_fit.csv")
    with tempfile.TemporaryDirectory() as tmp:
        stops = walk(["--real_csv", run, "--max_iter", "1", "--refine_iter", "1", "--num_envs", "4", "--no_plots",
                      "--quiet", "--fit_groups", a.fit_groups, "--log_dir", tmp])
    if a.stops:
        for f, fn in stops:
            print(f"  {_layer(f):9s} {f}:{fn}")
    s = summarize(stops)
    print(f"the fit job's arguments: {s['stops']} stops in {s['files']} files, {s['climbs']} climbs up a layer, "
          f"jobs/fit_job.py revisited {s['fit_job_revisits']} times")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
