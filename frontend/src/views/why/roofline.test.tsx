// @vitest-environment jsdom
// The roofline section's pure parts: the roofs (min(peak TF/s, TB/s × intensity), one per
// dtype present, dtypes of one peak sharing it), the log ranges, the points (one per
// plottable row, its row index kept), escaped tooltips, the table's columns and names as text.
import { describe, expect, it } from "vitest";
import type { RooflineRow } from "../../api/types/why";
import { DataTable } from "../../components/DataTable";
import { mount } from "../../testing/mount";
import {
  fmtFlops, fmtSig, logRange, memoryLabel, peaksText, plottable, pointSize, pointTooltip, roofLine, rooflineCols,
  rooflineOption, roofsFor, roofY,
} from "./Roofline";


const EVIL = `<img src=x onerror="window.__pwned=1">`;
const V100 = { tbps: 0.9, tflops: { fp64: 7.8, fp32: 15.7, fp16: 125.0 } };
const H100 = { tbps: 3.35, tflops: { fp32: 67.0, fp16: 989.4, bf16: 989.4 } };


function row(name: string, extra: Partial<RooflineRow> = {}): RooflineRow {
  return {
    name, dtype: "fp32", calls: 3, flops: 2e9, bytes: 1e9, device_ns: 1e6, tflops: 2, tbps: 1, intensity: 2,
    peak_tflops: 15.7, peak_tbps: 0.9, compute_pct: 12.7, memory_pct: 111, bound: "memory", source: "shapes", ...extra,
  };
}

describe("roofs", () => {
  it("is min(peak, bandwidth × intensity)", () => {
    expect(roofY(15.7, 0.9, 1)).toBeCloseTo(0.9);
    expect(roofY(15.7, 0.9, 100)).toBe(15.7);
    expect(roofY(15.7, 0.9, 15.7 / 0.9)).toBeCloseTo(15.7);
  });
  it("has one roof per dtype present with a peak, one for dtypes of the same peak", () => {
    expect(roofsFor([row("a"), row("b", { dtype: "fp64" }), row("c", { dtype: "bf16" }), row("d", { dtype: null })], V100).map((r) => r.name))
      .toEqual(["fp32 15.7 TF/s", "fp64 7.8 TF/s"]);  // no bf16 roof on a V100
    const h = roofsFor([row("a", { dtype: "bf16" }), row("b", { dtype: "fp16" }), row("c")], H100);
    expect(h.map((r) => [r.dtypes, r.tflops, r.tbps])).toEqual([[["bf16", "fp16"], 989.4, 3.35], [["fp32"], 67, 3.35]]);
    expect(h[0].name).toBe("bf16/fp16 989 TF/s");
    expect(h[0].ridge).toBeCloseTo(989.4 / 3.35);
    expect(roofsFor([row("a")], null)).toEqual([]);
    expect(roofsFor([row("a")], { tbps: null, tflops: { fp32: 1 } })).toEqual([]);
    expect(memoryLabel(3.35, "NVIDIA H100 80GB HBM3")).toBe("HBM 3.35 TB/s");
    expect(memoryLabel(0.3, "NVIDIA L4")).toBe("DRAM 0.3 TB/s");
  });
  it("draws the slope from the plot's edge to the ridge, then flat", () => {
    const [x0, r, x1] = roofLine(15.7, 0.9, 0.01, 1000, 0.01);
    expect(x0[0]).toBeCloseTo(0.01 / 0.9);  // enters at the bottom edge
    expect(x0[1]).toBeCloseTo(0.01);
    expect(r[0]).toBeCloseTo(15.7 / 0.9);
    expect(r[1]).toBe(15.7);
    expect(x1).toEqual([1000, 15.7]);
    for (const [x, y] of [x0, r, x1]) expect(y).toBeCloseTo(roofY(15.7, 0.9, x));
    expect(roofLine(15.7, 0.9, 100, 1000, 0.01)).toEqual([[100, 15.7], [1000, 15.7]]);  // ridge left of the plot
    expect(roofLine(15.7, 0.9, 0.1, 10, 0.01)).toEqual([[0.1, 0.09000000000000001], [10, 9]]);  // ridge right of it
  });
  it("spans whole decades", () => {
    expect(logRange([0.083, 15.3, 17.4])).toEqual([0.01, 100]);
    expect(logRange([5, 5])).toEqual([1, 10]);
    expect(logRange([0, -1, NaN])).toEqual([0.1, 10]);
    expect(logRange([10])).toEqual([10, 100]);
  });
});

describe("points", () => {
  const rows = [
    row("aten::mm", { intensity: 15.27, tflops: 5.72, device_ns: 275000, bound: "memory" }),
    row(EVIL, { intensity: 0.0833, tflops: 0.063, device_ns: 24098000 }),
    row("aten::conv2d", { dtype: "bf16", intensity: 400, tflops: 300, bound: "compute", peak_tflops: null }),
    row("no time", { tflops: null, tbps: null, device_ns: 0 }),
    row("no bytes", { intensity: null, bytes: 0 }),
  ];
  it("maps each plottable row to a point [intensity, tflops, row index], by dtype", () => {
    expect(rows.map(plottable)).toEqual([true, true, true, false, false]);
    const o = rooflineOption(rows, V100, "Tesla V100-DGXS-32GB") as any;
    const scatter = o.series.filter((s: any) => s.type === "scatter");
    expect(scatter.map((s: any) => s.name)).toEqual(["fp32", "bf16"]);
    expect(scatter[0].data.map((p: any) => p.value)).toEqual([[15.27, 5.72, 0], [0.0833, 0.063, 1]]);
    expect(scatter[1].data[0]).toMatchObject({ value: [400, 300, 2], symbol: "diamond", name: "aten::conv2d" });
    expect(o.tbRoofline.points).toBe(3);
    expect(o.xAxis.type).toBe("log");
    expect(o.yAxis.type).toBe("log");
    expect([o.xAxis.min, o.xAxis.max]).toEqual([0.01, 1000]);
    expect(o.yAxis.min).toBe(0.01);
    expect(o.yAxis.max).toBeGreaterThanOrEqual(300);
    // the roof of fp32 only (V100 has no bf16 peak), its memory slope labelled
    const roofs = o.series.filter((s: any) => s.type === "line");
    expect(roofs.map((s: any) => s.name)).toEqual(["fp32 15.7 TF/s"]);
    expect(roofs[0].roof).toMatchObject({ tflops: 15.7, tbps: 0.9 });
    const labels = roofs[0].data.filter((p: any) => p.label).map((p: any) => p.label.formatter);
    expect(labels).toEqual(["HBM 0.9 TB/s", "fp32 15.7 TF/s"]);
    for (const p of roofs[0].data) expect(p.value[1]).toBeCloseTo(roofY(15.7, 0.9, p.value[0]));
  });
  it("sizes points by device time", () => {
    expect(pointSize(0, 100)).toBe(6);
    expect(pointSize(100, 100)).toBe(30);
    expect(pointSize(25, 100)).toBe(18);
  });
  it("has points but no roofs without peaks", () => {
    const o = rooflineOption(rows, null, "Mystery GPU") as any;
    expect(o.series.every((s: any) => s.type === "scatter")).toBe(true);
    expect(o.tbRoofline.roofs).toEqual([]);
  });
  it("escapes the op's name in the tooltip", () => {
    const o = rooflineOption(rows, V100) as any;
    const tip = o.tooltip.formatter({ seriesType: "scatter", value: [0.0833, 0.063, 1] });
    expect(tip).not.toContain("<img");
    expect(tip).toContain("&lt;img src=x");
    expect(tip).toContain("0.063");
    expect(tip).toContain("memory");
    expect(o.tooltip.formatter({ seriesType: "line", value: [1, 1] })).toBe("");
    const noRoof = pointTooltip(row("x", { peak_tflops: null, peak_tbps: null, compute_pct: null, memory_pct: null, bound: null }));
    expect(noRoof).toContain("– (no roof)");
  });
});

describe("table and text", () => {
  it("formats rates, FLOPs and peaks", () => {
    expect(fmtSig(989.4)).toBe("989");
    expect(fmtSig(0.0833333)).toBe("0.0833");
    expect(fmtSig(null)).toBe("–");
    expect(fmtFlops(1844871168)).toBe("1.84 GFLOP");
    expect(fmtFlops(512)).toBe("512 FLOP");
    expect(peaksText(V100)).toBe("0.9 TB/s · fp64 7.8, fp32 15.7, fp16 125 TF/s");
    expect(peaksText(null)).toBe("");
  });
  it("has the columns, – for no roof, names as text", () => {
    const cols = rooflineCols("Operator");
    expect(cols.map((c) => c.header)).toEqual(["Operator", "Dtype", "Calls", "FLOPs", "Bytes", "Device time", "TFLOP/s", "TB/s", "Intensity",
      "Peak TFLOP/s", "Peak TB/s", "Of compute peak", "Of memory peak", "Bound", "FLOPs from"]);
    const r = row(EVIL, { peak_tflops: null, peak_tbps: null, compute_pct: null, memory_pct: null, bound: null });
    expect(cols.map((c) => c.value(r))).toEqual([EVIL, "fp32", 3, 2e9, 1e9, 1e6, 2, 1, 2, null, null, null, null, "", "shapes"]);
    const el = mount(<DataTable rows={[r]} cols={cols} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
    expect([...el.querySelectorAll("td")].filter((td) => td.textContent === "–").length).toBeGreaterThanOrEqual(4);
  });
});
