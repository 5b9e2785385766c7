"""Makes a new virtual environment that holds only torch (and what torch requires), plus the
build tools pip needs for `--no-build-isolation`, taken from an environment that already has them.

    python3 scripts/lib/torch_only_venv.py SOURCE_PYTHON TARGET_DIR

The files are hard links into SOURCE's site-packages (copies where the two are on different file
systems), so a torch of several GB costs seconds and no disk. That is what a user who has never
cloned the project has after `pip install torch`: the sdist install test (scripts/test_sdist.sh)
builds harness_sim there, with nothing else of the project's environment in reach.
"""
import json
import os
import shutil
import subprocess
import sys

# The distributions a torch-only environment starts from (with what each requires).
ROOTS = ("torch", "setuptools", "wheel", "packaging")

# Run inside SOURCE's Python with the roots as its argument (JSON): every distribution in their
# requirement closure (markers evaluated), with the files each installed.
CLOSURE = r"""
import json, re, sys
from importlib import metadata
from packaging.requirements import Requirement
wanted = [(root, ()) for root in json.loads(sys.argv[1])]
seen, out = set(), {}
while wanted:
    raw, extras = wanted.pop()
    name = re.sub(r"[-_.]+", "-", raw).lower()
    if (name, extras) in seen:
        continue
    seen.add((name, extras))
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    out[name] = [str(f) for f in (dist.files or [])]
    for text in dist.requires or []:
        req = Requirement(text)
        # torch 2.15 requires cuda-toolkit[cudart,cublas,...]: the extras name what comes along
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            wanted.append((req.name, tuple(sorted(req.extras))))
print(json.dumps({"site": [p for p in sys.path if p.endswith("site-packages")][0], "dists": out}))
"""


def closure(source_python, roots=ROOTS):
    found = subprocess.run([source_python, "-c", CLOSURE, json.dumps(list(roots))], check=True,
                           capture_output=True, text=True)
    return json.loads(found.stdout)


def link_or_copy(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def make_venv(source_python, target, roots=ROOTS):
    """A new virtual environment at `target` holding the distributions `roots` of SOURCE's and
    what they require, their files hard-linked, and pip. Returns a line saying what it holds."""
    found = closure(source_python, roots)
    if "torch" not in found["dists"]:
        raise RuntimeError(f"{source_python} has no torch")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", target], check=True)
    site = subprocess.run([os.path.join(target, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    files = 0
    for name, paths in sorted(found["dists"].items()):
        for rel in paths:
            src = os.path.normpath(os.path.join(found["site"], rel))
            if not src.startswith(found["site"] + os.sep) or not os.path.isfile(src):
                continue  # scripts in bin/ and the like: not needed to import or build
            link_or_copy(src, os.path.join(site, os.path.relpath(src, found["site"])))
            files += 1
    # pip itself, fresh from the bundled wheel (ensurepip), as `python -m venv` gives everyone.
    subprocess.run([os.path.join(target, "bin", "python"), "-m", "ensurepip", "--default-pip"],
                   check=True, capture_output=True)
    return (f"{target}: {len(found['dists'])} distributions ({', '.join(sorted(found['dists']))}), "
            f"{files} files linked from {found['site']}")


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: torch_only_venv.py SOURCE_PYTHON TARGET_DIR")
    source_python, target = argv[1], argv[2]
    if os.path.exists(target):
        sys.exit(f"torch_only_venv.py: {target} exists; give a new folder")
    try:
        print(make_venv(source_python, target), file=sys.stderr)
    except RuntimeError as e:
        sys.exit(f"torch_only_venv.py: {e}")


if __name__ == "__main__":
    main(sys.argv)
