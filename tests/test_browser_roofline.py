"""The Operator view's Roofline section (issue 9, part 6) in a real browser, against the API.

Three runs: the V100 ResNet50 trace (fp32 operators under a V100 roof: 15.7 TF/s, 0.9 TB/s),
a handmade H100 trace (tests/test_roofline.py's fixture: a bf16 addmm counted from its
shapes, a conv2d with the trace's own flops, and an operator named like an HTML tag), and
the same ops on a device the peaks table does not know (points, no roof, % columns –).
The chart is read through the option it keeps on its element (`tbOption`): its points are
the API's rows (intensity, TFLOP/s), its roofs min(peak, TB/s × x) with the device's peaks;
the table through its CSV export; hovering a point shows its op's name, as text. Debian's
Chromium (Playwright) drives a real `tb-profiler serve` (browser_support.py); no request
leaves localhost, the console stays clean; screenshot: test-output/screenshots/why-roofline.png.
"""
from __future__ import annotations

import math
import shutil

import pytest
from browser_support import hash_state, serving
from datafiles import V100_TRACE
from kineto_fixtures import write_trace
from test_browser_views import api, assert_clean, assert_same_rows, card, export_csv
from test_browser_why import chart, section_shot
from test_roofline import H100, _doc, _kernel, _x, roofline_events

expect = pytest.importorskip("playwright.sync_api").expect

RUN = "v100"
H100_RUN = "h100"      # handmade: bf16 addmm, fp32 conv2d with a flops arg, an op named like a tag
NOROOF_RUN = "noroof"  # the same ops on a device without peaks
EVIL = '<img src=x onerror="window.__pwned=1">'

def _events():
    return [*roofline_events(),  # an operator named like an HTML tag, with the trace's own count
            _x("cpu_op", EVIL, 400, 50, flops=40_000_000, **{"Input Dims": [[1024, 1024]], "Input type": ["c10::BFloat16"]}),
            _x("cuda_runtime", "cudaLaunchKernel", 410, 5, correlation=4), _kernel("evil_k", 420, 20, 4)]


@pytest.fixture(scope="module")
def roof_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roofline")
    log = tmp / "logdir"
    (log / RUN).mkdir(parents=True)
    shutil.copy(V100_TRACE, log / RUN / V100_TRACE.name)
    write_trace(log / H100_RUN / "worker0.1.pt.trace.json", _doc(_events()))
    write_trace(log / NOROOF_RUN / "worker0.1.pt.trace.json", _doc(_events(), device="Mystery Accelerator 9000"))
    with serving(log, tmp / "cache") as base:
        yield base


COLS = [("Dtype", "dtype", "text"), ("Calls", "calls", "num"), ("FLOPs", "flops", "num"),
        ("Bytes (bytes)", "bytes", "num"), ("Device time (ns)", "device_ns", "num"), ("TFLOP/s", "tflops", "num"),
        ("TB/s", "tbps", "num"), ("Intensity", "intensity", "num"), ("Peak TFLOP/s", "peak_tflops", "num"),
        ("Peak TB/s", "peak_tbps", "num"), ("Of compute peak (%)", "compute_pct", "num"),
        ("Of memory peak (%)", "memory_pct", "num"), ("Bound", "bound", "text"), ("FLOPs from", "source", "text")]


def _plottable(r) -> bool:
    return all(r[k] is not None and math.isfinite(r[k]) and r[k] > 0 for k in ("intensity", "tflops"))


def _points(opt) -> list[tuple]:
    return sorted((p["name"], p["value"][0], p["value"][1]) for s in opt["series"] if s["type"] == "scatter"
                  for p in s["data"])


def _roofs(opt) -> dict[str, dict]:
    return {s["name"]: s for s in opt["series"] if s["type"] == "line"}


def _open(watch, base, run):
    watch.open(f"{base}/{hash_state(view='Operator', run=run)}")
    sec = card(watch.page, "Roofline")
    sec.scroll_into_view_if_needed()
    expect(sec.locator(".why-roofline")).to_be_visible()
    return sec


def _hover(page, opt, point) -> None:
    """Moves the mouse over a point: its pixel from the log axes and the grid."""
    box = page.get_by_role("img", name="Roofline").bounding_box()
    g = opt["grid"]
    w, h = box["width"] - g["left"] - g["right"], box["height"] - g["top"] - g["bottom"]

    def frac(v, lo, hi):
        return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    x = box["x"] + g["left"] + w * frac(point[0], opt["xAxis"]["min"], opt["xAxis"]["max"])
    y = box["y"] + g["top"] + h * (1 - frac(point[1], opt["yAxis"]["min"], opt["yAxis"]["max"]))
    page.mouse.move(x - 20, y - 20)
    page.mouse.move(x, y, steps=4)


def _tooltip(sec):
    return sec.locator(".chart div").filter(has_text="Intensity").last


def _check_rows(sec, d, table: str, what: str) -> dict:
    rows = d[table]
    expect(sec.locator(".why-roofline")).to_have_attribute("data-table", table)
    expect(sec.locator(".roofline-table .table-caption")).to_have_text(
        f"{len(rows)} of {d[f'{table}_total']} {table}" + (" (most FLOPs first)" if len(rows) < d[f"{table}_total"] else ""))
    opt = chart(sec.page, "Roofline")
    wanted = sorted((r["name"], r["intensity"], r["tflops"]) for r in rows if _plottable(r))
    assert [p[0] for p in _points(opt)] == [w[0] for w in wanted]
    for got, want in zip(_points(opt), wanted):
        assert got[1:] == pytest.approx(want[1:], rel=1e-12), (got, want)
    assert_same_rows(export_csv(sec.locator(".roofline-table .table-wrap")), rows, [(what, "name", "text"), *COLS])
    return opt


def test_v100_roofline_matches_the_api(roof_url, watch):
    d = api(roof_url, "roofline", run=RUN)
    assert d["device"]["name"] == "Tesla V100-DGXS-32GB" and d["operators"]
    assert {r["dtype"] for r in d["operators"]} == {"fp32"}
    sec = _open(watch, roof_url, RUN)
    page = watch.page
    expect(sec.locator(".roofline-device")).to_contain_text(
        "Tesla V100-DGXS-32GB · peaks: V100 peaks from the project's table")
    opt = _check_rows(sec, d, "operators", "Operator")
    roofs = _roofs(opt)
    assert list(roofs) == ["fp32 15.7 TF/s"]
    fp32 = roofs["fp32 15.7 TF/s"]
    assert (fp32["roof"]["tflops"], fp32["roof"]["tbps"]) == (15.7, 0.9)
    for p in fp32["data"]:  # every corner on y = min(15.7, 0.9 x)
        assert p["value"][1] == pytest.approx(min(15.7, 0.9 * p["value"][0]))
    corners = [p["value"] for p in fp32["data"]]
    assert corners[-1] == [opt["xAxis"]["max"], 15.7]  # flat to the right edge
    assert any(c[0] == pytest.approx(15.7 / 0.9) for c in corners)  # the ridge point
    labels = [p["label"]["formatter"] for p in fp32["data"] if p.get("label")]
    assert labels == ["HBM 0.9 TB/s", "fp32 15.7 TF/s"]
    for n in d["notes"]:
        expect(sec.locator(".notes")).to_contain_text(n)

    section_shot(sec, "why-roofline")

    # hover the operator with the most device time
    top = max((r for r in d["operators"] if _plottable(r)), key=lambda r: r["device_ns"])
    _hover(page, opt, (top["intensity"], top["tflops"]))
    tip = _tooltip(sec)
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(top["name"])
    expect(tip).to_contain_text("fp32")

    # the kernels as points instead
    sec.get_by_role("tab", name="Kernels").click()
    _check_rows(sec, d, "kernels", "Kernel")
    assert_clean(watch)


def test_h100_roofline_roofs_per_dtype_and_escaped_names(roof_url, watch):
    d = api(roof_url, "roofline", run=H100_RUN)
    ops = {r["name"]: r for r in d["operators"]}
    assert set(ops) == {"aten::addmm", "aten::conv2d", EVIL}
    assert ops["aten::addmm"]["dtype"] == "bf16" and ops["aten::conv2d"]["dtype"] == "fp32"
    sec = _open(watch, roof_url, H100_RUN)
    page = watch.page
    expect(sec.locator(".roofline-device")).to_contain_text(f"{H100} · peaks: H100 peaks from the project's table")
    opt = _check_rows(sec, d, "operators", "Operator")
    roofs = _roofs(opt)
    assert set(roofs) == {"bf16 989 TF/s", "fp32 67 TF/s"}
    for name, peak in (("bf16 989 TF/s", 989.4), ("fp32 67 TF/s", 67.0)):
        assert (roofs[name]["roof"]["tflops"], roofs[name]["roof"]["tbps"]) == (peak, 3.35)
        for p in roofs[name]["data"]:
            assert p["value"][1] == pytest.approx(min(peak, 3.35 * p["value"][0]))
    assert "HBM 3.35 TB/s" in [p["label"]["formatter"] for s in roofs.values() for p in s["data"] if p.get("label")]
    scatter = {s["name"]: s for s in opt["series"] if s["type"] == "scatter"}
    assert set(scatter) == {"bf16", "fp32"}

    section_shot(sec, "why-roofline-h100")
    evil = ops[EVIL]
    _hover(page, opt, (evil["intensity"], evil["tflops"]))
    tip = _tooltip(sec)
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(EVIL)  # the name, as text
    expect(tip).to_contain_text("bf16")
    expect(sec.locator("img")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None

    sec.get_by_role("tab", name="Kernels").click()
    _check_rows(sec, d, "kernels", "Kernel")
    assert_clean(watch)


def test_no_roof_points_only(roof_url, watch):
    d = api(roof_url, "roofline", run=NOROOF_RUN)
    assert d["device"]["peaks"] is None and d["operators"]
    assert all(r["compute_pct"] is None for r in d["operators"])
    sec = _open(watch, roof_url, NOROOF_RUN)
    expect(sec.locator(".roofline-device")).to_have_attribute("data-roof", "no")
    expect(sec.locator(".roofline-device")).to_contain_text("Mystery Accelerator 9000 · peaks: ")
    expect(sec.locator(".roofline-device")).to_contain_text("not in the table of device peaks")
    opt = _check_rows(sec, d, "operators", "Operator")
    assert _roofs(opt) == {}
    assert len(_points(opt)) == sum(map(_plottable, d["operators"]))
    # the % columns show –
    header = sec.locator(".roofline-table thead th").all_inner_texts()
    i = next(k for k, h in enumerate(header) if h.strip().startswith("Of compute peak"))
    cells = [r.locator("td").nth(i).inner_text() for r in sec.locator(".roofline-table tbody tr").all()]
    assert cells and set(cells) == {"–"}
    assert_clean(watch)
