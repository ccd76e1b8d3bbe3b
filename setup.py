"""Builds tb_profiler._native (the trace decoder) from native/ with the machine's C compiler.

Set TB_PROFILER_ASAN=1 to build it with AddressSanitizer (the CI runs the decoder tests
against such a build).
"""
import os
import sys

from setuptools import Extension, setup

NATIVE_SOURCES = sorted(os.path.join("native", f) for f in os.listdir("native") if f.endswith(".c"))

compile_args = ["-std=c11", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter"]
link_args = []
if os.environ.get("TB_PROFILER_ASAN") == "1":
    compile_args = ["-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined"]
    link_args = ["-fsanitize=address,undefined"]
if sys.platform == "win32":
    compile_args, link_args = [], []

setup(
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
