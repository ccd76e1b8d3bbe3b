"""Trace writer: a drop-in for ``torch.profiler.tensorboard_trace_handler``.

Why not torch's own: it exports straight to the final name, so a TensorBoard
watching the logdir can pick up half a file; it gzips at level 9 (slow for
little gain); and it only writes to local paths. This one writes to a hidden
temporary name in the same folder, gzips at a measured level, and publishes
with ``os.replace`` (an fsspec ``mv`` for other URLs; one upload to the final name on
an object store such as S3, where an upload is atomic), so readers only ever see
complete files. It also records, as the top-level key ``tbProfilerSourceRoots``, the
folders torch's relative frame names (``cnn.py(45): forward``) are relative to, so a
viewer can find the source files again.

torch is imported by nothing here: the profiler object arrives as an argument.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time

from tb_profiler.io.read import is_url

TRACE_SUFFIX = ".pt.trace.json"
TEMP_MARK = ".tmp-"

# Gzip level, chosen by measurement (``python benchmarks/bench_writer.py --trace
# FILE``: in-memory compression, median of 3-9, one core of the 2-core dev box)
# on a real samples/cnn.py trace (1.31 MB) and that trace blown up to 54 MB with
# shared/tools/make_big_trace.py --synth-gpu:
#
#   codec   level |  1.3 MB: ms    KB  |  54 MB: ms     KB   ratio
#   igzip     0   |        0.9    145  |       35    5911    9.2x
#   igzip     1   |        0.9    120  |       37    4907   11.1x  <- with isal
#   igzip     2   |        0.9    119  |       42    4864   11.2x
#   igzip     3   |        4.2    116  |      142    4935   11.0x
#   zlib      1   |        6.8    117  |      263    4844   11.2x
#   zlib      3   |        6.4    108  |      297    4420   12.3x  <- without isal
#   zlib      6   |       12.3     88  |      526    3567   15.2x
#   zlib      9   |       41.3     80  |     1882    3221   16.9x  (torch's choice)
#
# The handler runs inside the training loop (on_trace_ready blocks the step)
# and kineto's own JSON export costs ~8 ms/MB, so compression should add little
# to that: igzip 1 adds ~0.7 ms/MB, 50x faster than zlib 9, for files ~1.5x
# larger. igzip 2 buys 1% size for 13% time; igzip 3 is slower and no smaller.
# Without isal, zlib 3 is as fast as zlib 1 and 9% smaller; level 4 and up
# cost more time than they save in bytes.
ISAL_LEVEL = 1
ZLIB_LEVEL = 3

# Top-level key of the trace files we write: the folders the profiled process imported
# its Python sources from (see source_roots). A reader resolves relative frame names
# against them (tb_profiler.analysis.sources).
SOURCE_ROOTS_KEY = "tbProfilerSourceRoots"
_TAIL = 4096  # bytes read back from the end of an export to find its closing brace


def is_temp_name(name: str) -> bool:
    """True for the writer's in-progress files (``.<final>.tmp-<pid>[-gz]``).

    Discovery uses this to never list them: they are hidden and do not end in
    ``.pt.trace.json[.gz]``.
    """
    return name.startswith(".") and TEMP_MARK in name


def _temp_name(final: str) -> str:
    return f".{final}{TEMP_MARK}{os.getpid()}"


def default_worker_name() -> str:
    """``{hostname}_{pid}``, exactly as torch's handler names workers."""
    return f"{socket.gethostname()}_{os.getpid()}"


def gzip_file(src: str, dst: str) -> None:
    """Compress ``src`` into ``dst`` (standard gzip), igzip when available."""
    try:
        from isal import igzip

        opener = lambda p: igzip.open(p, "wb", compresslevel=ISAL_LEVEL)  # noqa: E731
    except ImportError:
        opener = lambda p: gzip.open(p, "wb", compresslevel=ZLIB_LEVEL)  # noqa: E731
    with open(src, "rb") as fin, opener(dst) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def _site_dirs() -> list[str]:
    import site

    out: list[str] = []
    for fn in ("getsitepackages", "getuserbase", "getusersitepackages"):
        try:
            got = getattr(site, fn)()
        except Exception:  # noqa: BLE001 - old virtualenvs lack some of these
            continue
        out.extend([got] if isinstance(got, str) else got)
    return out


def source_roots() -> list[str]:
    """The folders torch 2.x strips from python_function file names, plus the cwd.

    Why: torch names a frame relative to the first of its prefixes (site-packages,
    sys.path, the user site, torch's parent folder; torch/profiler/python_tracer.py)
    that holds it, so ``cnn.py(45): forward`` cannot be opened without them. Same set,
    same order (reverse-sorted: the deepest prefix first), existing folders only.
    sys.path and the cwd may change during a run: the answer is memoized per their value.
    """
    try:
        cwd = os.getcwd()
    except OSError:  # the cwd was deleted
        cwd = None
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    key = (tuple(p for p in sys.path if isinstance(p, str)), cwd, torch_file)
    if key not in _ROOTS_MEMO:
        _ROOTS_MEMO.clear()
        _ROOTS_MEMO[key] = _find_roots(*key)
    return list(_ROOTS_MEMO[key])


_ROOTS_MEMO: dict[tuple, list[str]] = {}


def _find_roots(path: tuple[str, ...], cwd: str | None, torch_file: str | None) -> list[str]:
    raw = [*path, *_site_dirs()]
    if isinstance(torch_file, str):
        raw.append(os.path.dirname(os.path.dirname(torch_file)))
    if cwd is not None:
        raw.append(cwd)
    roots = sorted({os.path.abspath(p) for p in raw}, reverse=True)
    return [r for r in roots if os.path.isdir(r)]


def add_source_roots(path: str, roots: list[str], trace_name: str | None = None) -> bool:
    """Add ``SOURCE_ROOTS_KEY: roots`` to the JSON object in ``path`` by rewriting its
    closing brace in place; False (file untouched) when it does not end in one.
    trace_name: also make the ``traceName`` the exporter wrote last (the path it was given:
    our temporary name) this one, the file's final path, as torch's own handler's files
    say; added where the export has none.

    Why in place: the export is already on disk and its last bytes are the object's
    closing brace; a seek and a ~1 KB write cost microseconds, where parsing and
    re-serializing would cost as much as the export itself. A failed write puts the
    original bytes back, so the trace is never lost for the sake of this key.
    """
    encodable = [r for r in roots if _utf8(r)]
    entry = f',"{SOURCE_ROOTS_KEY}":{json.dumps(encodable)}}}\n'.encode()
    name = f'"traceName": {json.dumps(trace_name)}'.encode() if trace_name and _utf8(trace_name) else None
    try:
        return _rewrite_tail(path, entry, name)
    except OSError:  # the export stands as written
        return False


# The exporters' last key: Kineto writes `],"traceName": "PATH" }`, torch's Python export
# `],\n"traceName": "PATH"\n}` (torch/profiler/_chrome_trace_export.py).
_LAST_TRACE_NAME = re.compile(rb'"traceName"\s*:\s*"(?:[^"\\]|\\.)*"\s*$')


def _rewrite_tail(path: str, entry: bytes, name: bytes | None = None) -> bool:
    """Replace the closing brace (and the blanks after it) with ``entry``, and the last
    ``"traceName": ...`` before it with ``name`` (added where there is none). Unbuffered,
    so a failed or short write is seen here, not at close, and can be undone."""
    with open(path, "r+b", buffering=0) as f:
        start = max(0, f.seek(0, os.SEEK_END) - _TAIL)
        f.seek(start)
        tail = f.readall()
        body = tail.rstrip()
        inner = body[:-1].rstrip()
        if not body.endswith(b"}") or inner.endswith(b"{") or not inner.strip():
            return False
        at = start + len(body) - 1
        if name is not None:
            last = _LAST_TRACE_NAME.search(inner)
            if last is not None:  # rewritten from its key on
                at, entry = start + last.start(), name + entry
            elif b'"traceName"' not in inner:
                entry = b"," + name + entry
        old = tail[at - start:]
        new = entry.ljust(len(old), b" ")  # covers the old bytes: no truncate (~0.7 ms here)
        try:
            f.seek(at)
            if f.write(new) == len(new):
                return True
        except OSError:
            pass
        f.seek(at)
        f.write(old)
        f.truncate()
        return False


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in a path (surrogate escapes)
        return False
    return True


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _export_local(prof, folder: str, final: str, use_gzip: bool, use_python_export: bool,
                  trace_name: str | None = None) -> str:
    """Export into ``folder`` under a temp name and publish it as ``final``; its traceName
    is ``trace_name`` (default: the path it is published at)."""
    tmp = os.path.join(folder, _temp_name(final))
    tmp_gz = tmp + "-gz"
    target = os.path.join(folder, final)
    try:
        # The temp name does not end in .gz, so torch writes plain JSON; we gzip.
        prof.export_chrome_trace(tmp, use_python_export=use_python_export)
        add_source_roots(tmp, source_roots(), trace_name or target)
        if use_gzip:
            gzip_file(tmp, tmp_gz)
            _remove(tmp)
            os.replace(tmp_gz, target)
        else:
            os.replace(tmp, target)
    finally:
        _remove(tmp)
        _remove(tmp_gz)
    return target


# fsspec protocols of object stores: an object becomes visible whole, when its upload
# completes, and "folders" are only name prefixes.
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"})


def _export_fsspec(prof, url: str, final: str, use_gzip: bool, use_python_export: bool) -> str:
    """Write locally, then upload so that no half file is ever visible: straight to the
    final name on an object store (its upload is atomic), else to a temp name then ``mv``.

    Why no makedirs on an object store: s3fs's creates the *bucket* when it is missing, so
    a typo in the bucket name would make a new bucket instead of failing."""
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(url)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    object_store = bool(protocols & _OBJECT_STORES)
    if not object_store:
        try:
            fs.makedirs(root, exist_ok=True)
        except Exception:  # noqa: BLE001 - put_file reports the real errors
            pass
    remote_final = f"{root.rstrip('/')}/{final}"
    remote_tmp = remote_final if object_store else f"{root.rstrip('/')}/{_temp_name(final)}"
    with tempfile.TemporaryDirectory(prefix="tb_profiler-") as local_dir:
        local = _export_local(prof, local_dir, final, use_gzip, use_python_export,
                              trace_name=f"{url.rstrip('/')}/{final}")
        try:
            fs.put_file(local, remote_tmp)
            if remote_tmp != remote_final:
                fs.mv(remote_tmp, remote_final)
        except BaseException:
            try:
                if remote_tmp != remote_final and fs.exists(remote_tmp):
                    fs.rm(remote_tmp)
            except Exception:  # noqa: BLE001 - keep the original error
                pass
            raise
    return fs.unstrip_protocol(remote_final)


def tensorboard_trace_handler(dir_name, worker_name: str | None = None, use_gzip: bool = False,
                              use_python_export: bool = False):
    """Return an ``on_trace_ready`` callable writing ``{worker}.{time_ns}.pt.trace.json[.gz]``.

    Same signature and file names as ``torch.profiler.tensorboard_trace_handler``;
    one file per profiling cycle. ``dir_name`` may be a local path or an fsspec
    URL (``memory://``, ``s3://``, ``file://``...). Each file also carries the profiled
    process's source roots (``SOURCE_ROOTS_KEY``), and as ``traceName`` its final path,
    ``os.path.join(dir_name, file_name)`` as torch's handler gives it (``dir_name/file_name``
    for a URL), never the temporary name it was exported to (torch's own handler writes its
    temporary file's name there for ``use_gzip``). The callable returns the path (or URL)
    it wrote, which torch ignores.
    """
    dir_name = os.fspath(dir_name)
    if dir_name.startswith("file://"):
        dir_name = dir_name[len("file://"):]

    def handler_fn(prof) -> str:
        nonlocal worker_name
        if not worker_name:
            worker_name = default_worker_name()
        # Nanoseconds, as torch: two cycles never share a name.
        final = f"{worker_name}.{time.time_ns()}{TRACE_SUFFIX}" + (".gz" if use_gzip else "")
        if is_url(dir_name):
            return _export_fsspec(prof, dir_name, final, use_gzip, use_python_export)
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        return _export_local(prof, dir_name, final, use_gzip, use_python_export)

    return handler_fn
