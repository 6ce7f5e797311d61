"""Measure the package's import graph: imports that run up a layer, circles between packages, the largest files and
functions.

    python benchmarks/import_graph.py [--top 10] [--all]

Every ``import isaaclab_sysid.X`` / ``from isaaclab_sysid.X import ...`` in ``source/isaaclab_sysid/isaaclab_sysid``
counts, also those inside functions (marked ``lazy``: they still tie the layers together). Each module is given a
layer by :func:`layer_of`, bottom to top:

    base (timebase, paths, utils) -> data -> robots -> ingest (importers: recordings into runs, with the robot
    model) -> sim -> objective (fit's ParamSpace, FitResult, loss, residuals, Jacobian, ...) -> fit (the search)
    -> stage (evaluate, intervals, export, tasks, twin and the other studies' packages) -> jobs (jobs,
    benchmarking)

An import from a lower layer of a module in a higher one is fine; the other way round "runs up a layer". A circle is a
strongly connected set of units (top-level packages; fit/ split into its objective and search halves) in the graph of
imports between units. Reads only files: nothing is imported.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "source" / "isaaclab_sysid" / "isaaclab_sysid"
PKG = "isaaclab_sysid"

LAYERS = ("base", "robots", "data", "arm", "ingest", "sim", "objective", "fit", "stage", "jobs")
#: fit/ modules that are the objective layer (the rest of fit/ is the search layer)
OBJECTIVE = {"replay_facts", "tracking", "state_age_source", "torque_replay", "run_folder"}
UNIT_LAYER = {
    "__init__": "base", "timebase": "base", "paths": "base", "utils": "base",
    "data": "data",
    "robots": "robots", "arm_model": "arm",
    "importers": "ingest",
    "sim": "sim", "tasks": "stage",
    "fit.objective": "objective", "objective": "objective", "fit.search": "fit",
    "rigid_body": "stage", "evaluate": "stage", "intervals": "stage", "export": "stage", "excitation": "stage",
    "contact": "stage", "payload": "stage", "online": "stage", "cautious": "stage", "residual_stats": "stage",
    "twin": "stage", "jobs": "jobs", "benchmarking": "jobs",
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def unit_of(mod: str) -> str:
    """The package-level unit of a module name relative to the package (``fit`` split in two)."""
    parts = mod.split(".")
    if parts[0] == "fit":
        if len(parts) == 1:
            return "fit.search"
        return "fit.objective" if parts[1] in OBJECTIVE else "fit.search"
    return parts[0]


def layer_of(mod: str) -> str:
    unit = unit_of(mod)
    if unit not in UNIT_LAYER:
        raise SystemExit(f"import_graph: no layer for unit {unit!r} ({mod}); add it to UNIT_LAYER")
    return UNIT_LAYER[unit]


def imports_of(tree: ast.Module) -> list[tuple[str, int, bool]]:
    """(imported module relative to the package, line, lazy) for every package import in a file."""
    out = []
    top_level = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == PKG:  # from isaaclab_sysid import x
                names = [f"{PKG}.{a.name}" for a in node.names]
        for name in names:
            if name == PKG or not name.startswith(PKG + "."):
                continue
            lazy = id(node) not in top_level and not _in_type_checking(tree, node)
            out.append((name[len(PKG) + 1:], node.lineno, lazy))
    return out


def _in_type_checking(tree: ast.Module, target: ast.AST) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            if any(n is target for n in ast.walk(node)):
                return True
    return False


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10, help="how many of the largest files and functions")
    ap.add_argument("--all", action="store_true", help="list every up-layer import (default: grouped by unit pair)")
    args = ap.parse_args(argv)

    files = sorted(ROOT.rglob("*.py"))
    up: list[tuple[str, str, int, bool, str, str]] = []
    unit_edges: dict[str, set[str]] = defaultdict(set)
    module_edges: dict[str, set[str]] = defaultdict(set)
    modules = {module_name(p) for p in files}
    edge_examples: dict[tuple[str, str], list[str]] = defaultdict(list)
    sizes: list[tuple[int, str]] = []
    funcs: list[tuple[int, str]] = []
    n_imports = 0
    for path in files:
        src = path.read_text()
        tree = ast.parse(src, str(path))
        mod = module_name(path)
        rel = str(path.relative_to(ROOT))
        sizes.append((len(src.splitlines()), rel))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))
        src_layer = layer_of(mod)
        for target, line, lazy in imports_of(tree):
            n_imports += 1
            tm = target if target in modules else target.rsplit(".", 1)[0]  # from pkg.mod import name
            if tm in modules and tm != mod:
                module_edges[mod].add(tm)
            su, tu = unit_of(mod), unit_of(target)
            if su != tu:
                unit_edges[su].add(tu)
                edge_examples[(su, tu)].append(f"{rel}:{line} -> {target}{' (lazy)' if lazy else ''}")
            tl = layer_of(target)
            if LAYERS.index(tl) > LAYERS.index(src_layer):
                up.append((rel, target, line, lazy, src_layer, tl))

    print(f"import graph of {ROOT.relative_to(Path.cwd()) if ROOT.is_relative_to(Path.cwd()) else ROOT}: "
          f"{len(files)} files, {sum(s for s, _ in sizes)} lines, {n_imports} package imports")
    print("layers, bottom to top: " + " -> ".join(
        f"{layer} ({', '.join(u for u, lay in UNIT_LAYER.items() if lay == layer)})" for layer in LAYERS))

    pairs: dict[tuple[str, str], list] = defaultdict(list)
    for item in up:
        pairs[(unit_of(module_name(ROOT / item[0])), unit_of(item[1]))].append(item)
    print(f"\nimports that run up a layer: {len(up)} ({sum(1 for u in up if u[3])} lazy) "
          f"in {len(pairs)} unit pairs")
    for (su, tu), items in sorted(pairs.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {su} ({UNIT_LAYER[su]}) -> {tu} ({UNIT_LAYER[tu]}): {len(items)}")
        shown = items if args.all else items[:3]
        for rel, target, line, lazy, _, _ in shown:
            print(f"      {rel}:{line} -> {target}{' (lazy)' if lazy else ''}")
        if len(shown) < len(items):
            print(f"      ... {len(items) - len(shown)} more (--all)")

    comps = sccs(unit_edges)
    print(f"\nimport circles between units: {len(comps)}")
    for comp in comps:
        print(f"  {{{', '.join(comp)}}}")
        for a in comp:
            for b in comp:
                if b in unit_edges.get(a, ()):
                    ex = edge_examples[(a, b)]
                    print(f"      {a} -> {b}: {len(ex)} import(s), e.g. {ex[0]}")

    mutual = sorted((a, b) for a in unit_edges for b in unit_edges[a] if a < b and a in unit_edges.get(b, ()))
    print(f"\ntwo-unit circles (A imports B and B imports A): {len(mutual)}")
    for a, b in mutual:
        print(f"  {a} <-> {b}: {edge_examples[(a, b)][0]}  |  {edge_examples[(b, a)][0]}")

    mod_comps = sccs(module_edges)
    print(f"\nimport circles between modules (lazy imports included): {len(mod_comps)}")
    for comp in mod_comps:
        print(f"  {{{', '.join(comp)}}}")

    print(f"\nthe {args.top} largest files (lines):")
    for n, rel in sorted(sizes, reverse=True)[: args.top]:
        print(f"  {n:6d}  {rel}")
    print(f"\nthe {args.top} largest functions (lines):")
    for n, where in sorted(funcs, reverse=True)[: args.top]:
        print(f"  {n:6d}  {where}")
    over = sum(1 for n, _ in funcs if n > 100)
    print(f"\nfunctions over 100 lines: {over}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
