"""The frontend bundle: files under tb_profiler/plugin/static/ (built from frontend/ by
setup.py or ``npm run build``), served by relative path, never outside that folder.

Until the bundle is built, ``index.js`` is a tiny module whose ``render()`` says so
(TensorBoard imports it in the plugin iframe) and the standalone page says the same: a
clear message, not a fake UI.
"""
from __future__ import annotations

import json
import mimetypes
import os
import posixpath

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
ENTRY = "index.js"

NOT_BUILT = ("The tb_profiler frontend bundle is not built, so there is no UI to show. "
             "Build it from a source checkout with `cd frontend && npm ci && npm run build` "
             "(it writes tb_profiler/plugin/static/index.js), or reinstall with `pip install .` "
             "where Node.js is available. The JSON API under /data/plugin/pytorch_profiler/ works without it.")

_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".html": "text/html",
          ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml",
          ".png": "image/png", ".ico": "image/x-icon", ".woff": "font/woff", ".woff2": "font/woff2",
          ".ttf": "font/ttf", ".wasm": "application/wasm", ".txt": "text/plain"}


def bundle_built() -> bool:
    return os.path.isfile(os.path.join(STATIC_DIR, ENTRY))


def resolve(rel: str) -> str | None:
    """The file under STATIC_DIR a request path names, or None (missing, or escaping)."""
    if not rel or "\x00" in rel or "\\" in rel:
        return None
    norm = posixpath.normpath("/" + rel).lstrip("/")
    if not norm or norm.startswith("..") or any(p.startswith(".") for p in norm.split("/")):
        return None
    root = os.path.realpath(STATIC_DIR)
    path = os.path.realpath(os.path.join(root, *norm.split("/")))
    if not path.startswith(root + os.sep) or not os.path.isfile(path):
        return None
    return path


def etag(path: str) -> str:
    """A strong validator from the file's size and mtime: a rebuilt bundle gets a new one."""
    st = os.stat(path)
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


def content_type(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    return _TYPES.get(ext) or mimetypes.guess_type(path)[0] or "application/octet-stream"


def not_built_module() -> str:
    """index.js while the bundle is missing: render() shows NOT_BUILT as text."""
    msg = json.dumps(NOT_BUILT)
    return ("export function render() {\n"
            "  const box = document.createElement('pre');\n"
            "  box.style.whiteSpace = 'pre-wrap';\n"
            "  box.style.font = '14px sans-serif';\n"
            "  box.style.padding = '24px';\n"
            f"  box.textContent = {msg};\n"
            "  document.body.appendChild(box);\n"
            "}\n")


STANDALONE_ENTRY = "_standalone_entry.js"


def standalone_page(built: bool) -> str:
    """The standalone server's ``/``: TensorBoard's plugin iframe document, without its
    inline script (our CSP allows none): a module file imports index.js and renders.
    The base is relative, so the page also works behind a proxy that serves it under a
    path prefix (JupyterHub, code-server's /proxy/PORT/)."""
    body = ("" if built else
            "<pre style=\"white-space:pre-wrap;font:14px sans-serif;padding:24px\">"
            + NOT_BUILT.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "</pre>")
    script = f'<script type="module" src="{STANDALONE_ENTRY}"></script>' if built else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>PyTorch Profiler</title>"
            "<base href=\"data/plugin/pytorch_profiler/\"></head>"
            f"<body>{body}{script}</body></html>\n")


def standalone_entry_module() -> str:
    return 'import("./index.js").then((m) => void m.render());\n'
