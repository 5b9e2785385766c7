"""Builds harness_sim._C with CMake against the torch installed in the building Python.

    pip install --no-build-isolation ./python              (from a clone; or -e ./python)
    python -m build --sdist --no-isolation python/         (an sdist that carries its C++ sources)
    pip install --no-build-isolation harness_sim-*.tar.gz  (no clone needed)

The extension needs the harness's own C++ sources (../harness in a clone, vendor/ in an sdist)
built with the headers of that torch and links its libraries, so it must be built by the Python
that will import it: build isolation would install a second torch to build against. From a clone
whose C++ build (../build, scripts/setup.sh's) uses this very torch -- the same release and git
commit: LibTorch 2.11.0 comes from the same PyPI wheel as torch 2.11.0 -- it links that build's
libharness.so (carried inside the package) and compiles only csrc/; otherwise (an sdist, another
torch) it compiles the sources itself. From a clone the CMake build directory is kept
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
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VENDOR = os.path.join(HERE, "vendor")  # only in an sdist: the C++ sources it compiles

# What of the repository an sdist carries: the harness's C++ sources (the extension compiles a
# part of them; which part is python/CMakeLists.txt's business) and the CMake modules it includes.
VENDORED_DIRS = {"harness": (".h", ".h.in", ".cpp", ".inc", "CMakeLists.txt")}
VENDORED_FILES = ["cmake/LibTorch.cmake", "cmake/HarnessFastCalls.cmake"]
OLDEST_TORCH, NEWEST_TORCH = (2, 11), (2, 15)  # the range python/tests run on in CI


def _torch():
    try:
        import torch
    except ImportError:
        sys.exit("harness_sim builds against the installed torch, and this Python has none: "
                 "install torch (2.11 to 2.15) first, then "
                 "`pip install --no-build-isolation harness_sim`")
    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if not OLDEST_TORCH <= release <= NEWEST_TORCH:
        sys.exit(f"harness_sim supports torch {'.'.join(map(str, OLDEST_TORCH))} to "
                 f"{'.'.join(map(str, NEWEST_TORCH))}; this Python has torch {torch.__version__}")
    return torch


def _source_root():
    """The folder holding harness/ and cmake/: the sdist's vendor/, or the clone this is in."""
    for root in (VENDOR, REPO):
        if os.path.isfile(os.path.join(root, "harness", "pch.h")):
            return root
    sys.exit(f"harness_sim's C++ sources are neither in {VENDOR} (an sdist) nor in "
             f"{os.path.join(REPO, 'harness')} (a clone): build from a clone or from the sdist")


def _ccache_launcher(env, source_root):
    """-DCMAKE_CXX_COMPILER_LAUNCHER=ccache, with the machine-wide cache where it is writable.
    Paths are hashed relative to the clone, or to the unpacked sdist (a new temporary folder for
    every pip run), so that a rebuild finds what an earlier one compiled."""
    if not shutil.which("ccache"):
        return []
    cache = os.environ.get("HARNESS_CACHE", "/var/cache/harness")
    if os.access(os.path.join(cache, "ccache"), os.W_OK):
        env.setdefault("CCACHE_DIR", os.path.join(cache, "ccache"))
    env.setdefault("CCACHE_BASEDIR", HERE if source_root == VENDOR else REPO)
    env.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime,include_file_ctime")
    env.setdefault("CCACHE_NOHASHDIR", "1")
    return ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]


def _forget_other_source(build_dir):
    """A kept build folder configured for another source folder (an earlier sdist's unpacked
    copy, with HARNESS_SIM_BUILD_DIR) cannot build this one: start it again (ccache keeps the
    compiled units)."""
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.isfile(cache):
        return
    with open(cache) as f:
        homes = [line.split("=", 1)[1].strip() for line in f if line.startswith("CMAKE_HOME_DIRECTORY:")]
    if homes and os.path.realpath(homes[0]) != os.path.realpath(HERE):
        shutil.rmtree(build_dir)


def _cache_entries(build_dir):
    """NAME -> value of a CMake build's CMakeCache.txt."""
    entries = {}
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            if ":" in line and "=" in line and not line.startswith(("#", "//")):
                name_type, value = line.rstrip("\n").split("=", 1)
                entries[name_type.split(":", 1)[0]] = value
    return entries


def _torch_version_py(libtorch_root):
    """(__version__, git_version) of a LibTorch prefix's version.py (the wheel's torch/version.py)."""
    found = {}
    with open(os.path.join(libtorch_root, "version.py")) as f:
        for line in f:
            for name in ("__version__", "git_version"):
                if line.startswith(name + " ") or line.startswith(name + "="):
                    found[name] = line.split("=", 1)[1].strip().strip("'\"")
    return found.get("__version__"), found.get("git_version")


def _cpp_build(torch, source_root):
    """The C++ project's build directory when the extension can link its libharness.so: a build
    from this clone (HARNESS_CPP_BUILD_DIR, default ../build) against this very torch (the same
    release and git commit; the C++ build always uses the C++11 ABI of libstdc++, so torch must
    too), without sanitizers or fuzzing. None otherwise: an sdist, another torch, no C++ build, or
    HARNESS_SIM_LINK_CPP_BUILD=0; then the extension compiles the harness's sources itself."""
    if source_root == VENDOR or os.environ.get("HARNESS_SIM_LINK_CPP_BUILD", "1") == "0":
        return None
    build_dir = os.path.abspath(os.environ.get("HARNESS_CPP_BUILD_DIR") or os.path.join(REPO, "build"))
    try:
        cache = _cache_entries(build_dir)
        version, git = _torch_version_py(cache.get("LIBTORCH_ROOT", ""))
    except OSError:
        return None
    same_torch = (version is not None and version.split("+")[0] == torch.__version__.split("+")[0]
                  and git == torch.version.git_version)
    plain = (not cache.get("HARNESS_SANITIZERS") and cache.get("HARNESS_FUZZ", "OFF") == "OFF"
             and os.path.realpath(cache.get("CMAKE_HOME_DIRECTORY", "")) == os.path.realpath(REPO))
    if not (same_torch and plain and torch.compiled_with_cxx11_abi()):
        return None
    return build_dir


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        torch = _torch()
        torch_dir = os.path.dirname(torch.__file__)
        source_root = _source_root()
        cpp_build = _cpp_build(torch, source_root)
        build_dir = self._cmake_build_dir(torch, torch_dir, source_root, cpp_build)
        env = dict(os.environ)
        launcher = _ccache_launcher(env, source_root)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _forget_other_source(build_dir)
        link_args = []
        if cpp_build:
            # Up to date with these sources (nothing to do after scripts/setup.sh).
            print(f"harness_sim: linking the C++ build {cpp_build} (the same torch)", flush=True)
            subprocess.run(["cmake", "--build", cpp_build, "--target", "harness", "harness_report"],
                           check=True, env=env)
            link_args = [f"-DHARNESS_CPP_BUILD_DIR={cpp_build}"]
        # Configured once; a configure that failed (a cache and no build file) is run again.
        if not any(os.path.exists(os.path.join(build_dir, f)) for f in ("build.ninja", "Makefile")):
            subprocess.run(["cmake", "-S", HERE, "-B", build_dir, *generator,
                            "-DCMAKE_BUILD_TYPE=Release", f"-DLIBTORCH_ROOT={torch_dir}",
                            f"-DHARNESS_SOURCE_ROOT={source_root}",
                            f"-DPython3_EXECUTABLE={sys.executable}", *link_args, *launcher],
                           check=True, env=env)
        subprocess.run(["cmake", "--build", build_dir, "--parallel", str(os.cpu_count() or 1)],
                       check=True, env=env)
        self._install_module(build_dir, self.get_ext_fullpath(ext.name), torch)

    def _cmake_build_dir(self, torch, torch_dir, source_root, cpp_build):
        """Kept beside the clone (incremental rebuilds); in the build's own temp for an sdist."""
        if os.environ.get("HARNESS_SIM_BUILD_DIR"):
            return os.environ["HARNESS_SIM_BUILD_DIR"]
        if source_root == VENDOR:
            return os.path.join(os.path.abspath(self.build_temp), "cmake")
        tag = hashlib.sha256(f"{torch_dir}|{sys.executable}|{cpp_build or ''}".encode()).hexdigest()[:10]
        return os.path.join(REPO, "build-python", f"torch-{torch.__version__.split('+')[0]}-{tag}")

    @staticmethod
    def _install_module(build_dir, target, torch):
        built = [f for f in os.listdir(build_dir) if f.startswith("_C.") and f.endswith(".so")]
        if len(built) != 1:
            sys.exit(f"expected one _C*.so in {build_dir}, found {built}")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(build_dir, built[0]), target)
        # The C++ build's library, where the module links it (found through its RPATH $ORIGIN).
        for lib in (f for f in os.listdir(build_dir) if f.startswith("libharness.so")):
            shutil.copyfile(os.path.join(build_dir, lib), os.path.join(os.path.dirname(target), lib))
        # Which torch it was built for: harness_sim refuses to load under another.
        info = os.path.join(os.path.dirname(target), "_build_info.py")
        with open(info, "w") as f:
            f.write(f'# Written by setup.py when the extension was built.\n'
                    f'TORCH_VERSION = "{torch.__version__}"\n')


class SdistWithSources(sdist):
    """An sdist that carries the C++ sources the extension compiles (vendor/), so that
    `pip install harness_sim-*.tar.gz` needs no clone of the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        if not os.path.isdir(os.path.join(REPO, "harness")):
            return  # an sdist made from an sdist: vendor/ came along in `files`
        for folder, suffixes in VENDORED_DIRS.items():
            for dirpath, _, names in os.walk(os.path.join(REPO, folder)):
                for name in sorted(names):
                    if name.endswith(suffixes):
                        self._vendor(os.path.relpath(os.path.join(dirpath, name), REPO), base_dir)
        for path in VENDORED_FILES:
            self._vendor(path, base_dir)

    def _vendor(self, relative, base_dir):
        target = os.path.join(base_dir, "vendor", relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(REPO, relative), target)


setup(ext_modules=[Extension("harness_sim._C", sources=[])],
      cmdclass={"build_ext": CMakeBuild, "sdist": SdistWithSources})
