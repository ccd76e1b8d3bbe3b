"""Builds tb_profiler._native (the trace decoder) from native/ with the machine's C compiler,
and the browser UI (frontend/, TypeScript) into tb_profiler/plugin/static/.

Set TB_PROFILER_ASAN=1 to build the decoder with AddressSanitizer (the CI runs the decoder
tests against such a build).

The UI bundle is built by build_py (so by `pip install .`, `pip install -e .` and wheel
builds) with `npm ci && npm run build` in frontend/; it is not committed. Without npm the
step is skipped with a warning (the plugin then serves a page saying the bundle is not
built); with npm, a failed build fails the install. It is skipped when the bundle is up to
date with frontend/'s sources (a hash in tb_profiler/plugin/static/.build-stamp), or when
TB_PROFILER_SKIP_FRONTEND=1; TB_PROFILER_FORCE_FRONTEND=1 rebuilds it anyway.
"""
import hashlib
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py as _build_py

NATIVE_SOURCES = sorted(os.path.join("native", f) for f in os.listdir("native") if f.endswith(".c"))

compile_args = ["-std=c11", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-pthread"]
link_args = ["-pthread"]
if os.environ.get("TB_PROFILER_ASAN") == "1":
    compile_args = ["-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", "-pthread"]
    link_args = ["-fsanitize=address,undefined", "-pthread"]
if sys.platform == "win32":
    compile_args, link_args = [], []

HERE = os.path.dirname(os.path.abspath(__file__))
FRONTEND = os.path.join(HERE, "frontend")
STATIC = os.path.join(HERE, "tb_profiler", "plugin", "static")
STAMP = os.path.join(STATIC, ".build-stamp")
FRONTEND_INPUTS = ("package.json", "package-lock.json", "tsconfig.json", "vite.config.ts", "index.html", "src")


def _warn(msg):
    bar = "=" * 78
    sys.stderr.write(f"\n{bar}\nWARNING (tb_profiler frontend): {msg}\n{bar}\n\n")


def _frontend_hash():
    """A hash of the frontend's sources: the bundle is rebuilt when it changes."""
    h = hashlib.sha256()
    for item in FRONTEND_INPUTS:
        top = os.path.join(FRONTEND, item)
        paths = []
        if os.path.isdir(top):
            for root, dirs, files in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d != "node_modules")
                paths += [os.path.join(root, f) for f in sorted(files)]
        elif os.path.isfile(top):
            paths.append(top)
        for p in paths:
            h.update(os.path.relpath(p, FRONTEND).replace(os.sep, "/").encode() + b"\0")
            with open(p, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def build_frontend():
    """npm ci && npm run build in frontend/, writing tb_profiler/plugin/static/."""
    bundle = os.path.join(STATIC, "index.js")
    if os.environ.get("TB_PROFILER_SKIP_FRONTEND") == "1":
        if not os.path.isfile(bundle):
            _warn("TB_PROFILER_SKIP_FRONTEND=1: the UI bundle is not built; the plugin will show "
                  "a page saying so (the JSON API works).")
        return
    if not os.path.isfile(os.path.join(FRONTEND, "package.json")):
        if not os.path.isfile(bundle):
            _warn("no frontend/ sources here and no prebuilt bundle: the UI will not be available.")
        return
    digest = _frontend_hash()
    if os.environ.get("TB_PROFILER_FORCE_FRONTEND") != "1" and os.path.isfile(bundle) and os.path.isfile(STAMP):
        with open(STAMP, encoding="utf-8") as f:
            if f.read().strip() == digest:
                print("tb_profiler frontend: bundle up to date, not rebuilt")
                return
    npm = shutil.which("npm")
    if npm is None:
        _warn("npm was not found, so the browser UI (frontend/) was NOT built. The TensorBoard "
              "plugin and `tb-profiler serve` will show a page saying the bundle is missing; the "
              "JSON API works. Install Node.js 20+ (with npm) and reinstall to get the UI.")
        return
    for args in ([npm, "ci", "--no-audit", "--no-fund"], [npm, "run", "build"]):
        print("tb_profiler frontend: running", " ".join(args[1:]), "in", FRONTEND, flush=True)
        try:
            subprocess.run(args, cwd=FRONTEND, check=True)
        except (subprocess.CalledProcessError, OSError) as e:
            raise SystemExit(
                f"error: building the tb_profiler frontend failed: `npm {' '.join(args[1:])}` in "
                f"{FRONTEND}: {e} Fix the error above, or set TB_PROFILER_SKIP_FRONTEND=1 to "
                "install without the UI.")
    if not os.path.isfile(bundle):
        raise SystemExit(f"error: the frontend build did not write {bundle}")
    with open(STAMP, "w", encoding="utf-8") as f:
        f.write(digest + "\n")


class build_py(_build_py):
    """build_py that builds the UI bundle first, so its files are package data."""

    def run(self):
        build_frontend()
        # package data is listed lazily and may have been listed before the bundle existed
        self.__dict__.pop("data_files", None)
        super().run()


setup(
    cmdclass={"build_py": build_py},
    ext_modules=[
        Extension(
            "tb_profiler._native",
            sources=NATIVE_SOURCES,
            include_dirs=["native"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )
    ],
)
