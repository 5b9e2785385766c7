"""Builds harness_sim._C with CMake against the torch installed in the building Python.

    pip install --no-build-isolation ./python        (or -e ./python)

The extension compiles the harness's own C++ sources (../harness) with the headers of that torch
and links its libraries, so it must be built by the Python that will import it: build isolation
would install a second torch to build against. The CMake build directory is kept
(../build-python/<torch>-<hash>) and ccache is used where present, so a reinstall rebuilds only
what changed.
"""
import hashlib
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _torch():
    try:
        import torch
    except ImportError:
        sys.exit("harness_sim builds against the installed torch, and this Python has none: "
                 "install torch==2.11.* first, then `pip install --no-build-isolation ./python`")
    return torch


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        torch = _torch()
        torch_dir = os.path.dirname(torch.__file__)
        tag = hashlib.sha256(f"{torch_dir}|{sys.executable}".encode()).hexdigest()[:10]
        build_dir = os.environ.get("HARNESS_SIM_BUILD_DIR") or os.path.join(
            REPO, "build-python", f"torch-{torch.__version__.split('+')[0]}-{tag}")
        env = dict(os.environ)
        cache = os.environ.get("HARNESS_CACHE", "/var/cache/harness")
        launcher = []
        if shutil.which("ccache"):
            launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            if os.access(os.path.join(cache, "ccache"), os.W_OK):
                env.setdefault("CCACHE_DIR", os.path.join(cache, "ccache"))
            env.setdefault("CCACHE_BASEDIR", REPO)
            env.setdefault("CCACHE_SLOPPINESS",
                           "pch_defines,time_macros,include_file_mtime,include_file_ctime")
            env.setdefault("CCACHE_NOHASHDIR", "1")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        # Configured once; a configure that failed (a cache and no build file) is run again.
        if not any(os.path.exists(os.path.join(build_dir, f)) for f in ("build.ninja", "Makefile")):
            subprocess.run(["cmake", "-S", HERE, "-B", build_dir, *generator,
                            "-DCMAKE_BUILD_TYPE=Release", f"-DLIBTORCH_ROOT={torch_dir}",
                            f"-DPython3_EXECUTABLE={sys.executable}", *launcher],
                           check=True, env=env)
        subprocess.run(["cmake", "--build", build_dir, "--parallel", str(os.cpu_count() or 1)],
                       check=True, env=env)
        built = [f for f in os.listdir(build_dir) if f.startswith("_C.") and f.endswith(".so")]
        if len(built) != 1:
            sys.exit(f"expected one _C*.so in {build_dir}, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(build_dir, built[0]), target)
        # Which torch it was built for: harness_sim refuses to load under another.
        info = os.path.join(os.path.dirname(target), "_build_info.py")
        with open(info, "w") as f:
            f.write(f'# Written by setup.py when the extension was built.\n'
                    f'TORCH_VERSION = "{torch.__version__}"\n')


setup(ext_modules=[Extension("harness_sim._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
