"""The layers of the Python package python/harness_sim hold (check_layers.py runs this).

Layers, lowest first (python/harness_sim/__init__.py names them; each sub-package's __init__.py
says what it holds and what it may import):
  0 base        harness_sim._C (the extension), _build_info (written by setup.py), _version,
                _after_import
  1 device      harness_sim._device/**      the sim device in torch; count(), phase(), reports
  2 cuda        harness_sim._cuda/**        what `run --as-cuda` makes of CUDA
  3 frameworks  harness_sim._frameworks/**  Lightning, DeepSpeed, the pytest plugin
  4 run         harness_sim._run/**         the `python -m harness_sim run` command
  5 top         harness_sim (__init__), __main__, and the public modules lightning, deepspeed,
                pytest (re-exports of _frameworks)
Every import of a harness_sim module is resolved from the source (`ast`): absolute and relative,
at module level and inside functions, `importlib.import_module("harness_sim...")` too. A module
may import its own layer and those below; an import that goes up, a cycle between the groups, a
cycle of modules, a module in no layer, a sub-package without a docstring in its __init__.py or
missing from python/pyproject.toml's packages is named, each with its file and line."""
from __future__ import annotations

import ast
import os
import re

PACKAGE = "harness_sim"
LAYERS = [  # (name, module prefixes), lowest first
    ("base", ["harness_sim._C", "harness_sim._build_info", "harness_sim._version",
              "harness_sim._after_import"]),
    ("device", ["harness_sim._device"]),
    ("cuda", ["harness_sim._cuda"]),
    ("frameworks", ["harness_sim._frameworks"]),
    ("run", ["harness_sim._run"]),
    ("top", ["harness_sim", "harness_sim.__main__", "harness_sim.lightning",
             "harness_sim.deepspeed", "harness_sim.pytest"]),
]
BUILT = {"harness_sim._C", "harness_sim._build_info"}  # modules the build makes: no .py here


def layer_of(module: str) -> tuple[int, str] | None:
    """(layer, its group) of a module name: the longest prefix in LAYERS that names it or a
    package above it; None for a module in no layer. The group is the prefix: one
    sub-package, or one module of the base or the top."""
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or (module.startswith(prefix + ".") and prefix != PACKAGE):
                if best is None or len(prefix) > len(best[1]):
                    best = (index, prefix)
    return best


def modules(root: str) -> dict[str, str]:
    """{module name: path relative to root} of every .py file of the package."""
    top = os.path.join(root, "python", PACKAGE)
    found = {}
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "__pycache__")))
        for f in sorted(files):
            if f.endswith(".py"):
                parts = os.path.relpath(os.path.join(d, f), os.path.join(root, "python"))
                parts = parts[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                found[".".join(parts)] = os.path.relpath(os.path.join(d, f), root)
    return found


def _imports(tree: ast.AST, name: str, is_package: bool, known: set[str]):
    """(line, imported module, at module level) for each import of a harness_sim module."""
    package = name if is_package else name.rpartition(".")[0]
    top_level = {id(n) for n in getattr(tree, "body", [])}
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    yield node.lineno, alias.name, at_top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != PACKAGE and not base.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield node.lineno, (candidate if candidate in known else base), at_top
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and str(node.args[0].value).startswith(PACKAGE)):
            yield node.lineno, node.args[0].value, False


def _cycles(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _link(a: str, b: str, edges: dict[str, dict[str, list[str]]]) -> str:
    return f"{a} -> {b} ({', '.join(sorted(set(edges[a][b])))})"


def _listed_packages(root: str) -> list[str] | None:
    text = open(os.path.join(root, "python", "pyproject.toml"), encoding="utf-8").read()
    m = re.search(r"^packages\s*=\s*\[([^\]]*)\]", text, re.M)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else None


def problems(root: str) -> list[str]:
    mods = modules(root)
    known = set(mods) | BUILT
    out = []
    groups: dict[str, dict[str, list[str]]] = {}  # group -> group -> the imports between them
    imports: dict[str, dict[str, list[str]]] = {}  # module -> module -> where
    for name, path in sorted(mods.items()):
        mine = layer_of(name)
        if mine is None:
            out.append(f"{path}: {name} is in no layer: add it to LAYERS in "
                       "tests/layering/python_layers.py")
            continue
        tree = ast.parse(open(os.path.join(root, path), encoding="utf-8").read(), path)
        for line, target, at_top in _imports(tree, name, path.endswith("__init__.py"), known):
            where = f"{path}:{line}"
            if target not in known:
                out.append(f"{where}: imports {target}, which does not exist")
                continue
            theirs = layer_of(target)
            if theirs is None:
                continue  # reported as a module in no layer
            if theirs[0] > mine[0]:
                out.append(f"{where}: {name} ({LAYERS[mine[0]][0]}) imports {target} "
                           f"({LAYERS[theirs[0]][0]}): up the layers")
            if theirs[1] != mine[1]:
                groups.setdefault(mine[1], {}).setdefault(theirs[1], []).append(where)
            if target != name:
                imports.setdefault(name, {}).setdefault(target, []).append(where)
    for component in _cycles(groups):
        # the imports that close it: from a group to one not below it
        links = [_link(a, b, groups) for a in component for b in component
                 if b in groups.get(a, {}) and layer_of(b)[0] >= layer_of(a)[0]]
        out.append(f"a cycle between {', '.join(component)}, closed by " + "; ".join(links))
    for component in _cycles(imports):
        links = [_link(a, b, imports) for a in component for b in component
                 if b in imports.get(a, {})]
        out.append(f"a cycle of modules {', '.join(component)}: " + "; ".join(links))
    listed = _listed_packages(root)
    for name, path in sorted(mods.items()):
        if not path.endswith("__init__.py"):
            continue
        if listed is not None and name not in listed:
            out.append(f"{path}: package {name} is not in python/pyproject.toml's packages: "
                       "it would be left out of the wheel and the sdist")
        doc = ast.get_docstring(ast.parse(open(os.path.join(root, path), encoding="utf-8").read()))
        if name != PACKAGE and not (doc and "import" in doc):
            out.append(f"{path}: no docstring saying what {name} holds and what it may import")
    for d, dirs, files in os.walk(os.path.join(root, "python", PACKAGE)):
        dirs[:] = [x for x in dirs if not x.startswith((".", "__pycache__"))]
        if any(f.endswith(".py") for f in files) and "__init__.py" not in files:
            out.append(f"{os.path.relpath(d, root)}/ has modules but no __init__.py")
    return out


def count(root: str) -> int:
    return len(modules(root))
