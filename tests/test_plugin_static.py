"""The bundle's files: revalidated on every load (ETag, 304), and a standalone page whose
relative <base> works under a proxy's path prefix."""
from __future__ import annotations

import os

import pytest
from werkzeug.test import Client

from tb_profiler.plugin import static
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState

PREFIX = "/data/plugin/pytorch_profiler/"


@pytest.fixture
def client(tmp_path):
    state = ProfilerState(str(tmp_path), cache_dir=str(tmp_path / ".cache"))
    app = ProfilerApp(state, standalone=True)
    yield Client(app)
    app.close()


@pytest.fixture
def bundle_file(monkeypatch, tmp_path):
    """A stand-in static folder, so the test does not depend on (or touch) the built bundle."""
    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "index.css").write_text("body { color: red }\n")
    monkeypatch.setattr(static, "STATIC_DIR", str(folder))
    return folder / "index.css"


def test_bundle_files_are_revalidated_with_an_etag(client, bundle_file):
    first = client.get(PREFIX + "index.css")
    assert first.status_code == 200 and first.data == b"body { color: red }\n"
    assert first.headers["Cache-Control"] == "no-cache"
    tag = first.headers["ETag"]
    again = client.get(PREFIX + "index.css", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.data == b""
    # a rebuilt bundle: a new validator, the new bytes
    bundle_file.write_text("body { color: blue }\n")
    st = bundle_file.stat()
    os.utime(bundle_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    changed = client.get(PREFIX + "index.css", headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.data == b"body { color: blue }\n"
    assert changed.headers["ETag"] != tag


def test_standalone_page_base_is_relative(client):
    resp = client.get("/")
    assert resp.headers["Content-Type"].startswith("text/html")
    # relative: under a proxy prefix (http://host/proxy/6006/) the bundle and the API
    # resolve below that prefix, not at the host's root
    assert '<base href="data/plugin/pytorch_profiler/">' in resp.get_data(as_text=True)


def test_standalone_favicon_is_no_content_not_an_error(client):
    assert client.get("/favicon.ico").status_code == 204
