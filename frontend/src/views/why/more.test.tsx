// @vitest-environment jsdom
// The copy bandwidth, annotations, launch queue and late arrivals sections' pure parts: the
// pageable-copy note, the GB/s-over-time chart, the late-arrival bars (window and slider over
// many ranks), the tables' columns, escaped tooltips and untrusted names rendered as text.
import { describe, expect, it } from "vitest";
import type { AnnotationsReply, CopyDirectionRow, CopyRow, LateRankRow, QueueStreamRow } from "../../api/types/why";
import { DataTable } from "../../components/DataTable";
import { lateBarsOption, lateOperatorCols, lateRankCols } from "../distributed/LateArrivals";
import { deviceAnnotationCols, hasAnnotations, hostAnnotationCols } from "./Annotations";
import { copyCols, directionCols, fmtGBps, knownBytes, memoryKinds, overTimeOption, overTimeSeries, pageableNote, pageableRows } from "./Memcpy";
import { fullStreams, queueCols } from "./Queue";
import { mount } from "../../testing/mount";


const EVIL = `<img src=x onerror="window.__pwned=1">`;


function dir(direction: string, src: string | null, dst: string | null, extra: Partial<CopyDirectionRow> = {}): CopyDirectionRow {
  return { direction, src, dst, copies: 2, bytes: 2000, time_ns: 1000, gbps: 2, gbps_median: 1.5, gbps_min: 1, gbps_max: 3, ...extra };
}

describe("copy bandwidth", () => {
  it("notes pageable host copies only when there are some", () => {
    expect(pageableNote([dir("H2D", "Pinned", "Device"), dir("D2D", "Device", "Device")])).toBeNull();
    const rows = [dir("H2D", "Pageable", "Device", { copies: 12, time_ns: 11492000 }), dir("D2H", "Device", "Pageable", { copies: 1, time_ns: 8000 }), dir("H2D", "Pinned", "Device")];
    expect(pageableRows(rows)).toHaveLength(2);
    const note = pageableNote(rows)!;
    expect(note).toContain("13 copies (H2D, D2H, 11.5 ms)");
    expect(note).toContain("pin_memory");
  });
  it("formats GB/s, unknown bytes and memory kinds", () => {
    expect(fmtGBps(10.059784197702749)).toBe("10.1");
    expect(fmtGBps(null)).toBe("–");
    expect(knownBytes(-1)).toBeNull();
    expect(knownBytes(0)).toBe(0);
    expect(memoryKinds({ src: "Pageable", dst: "Device" })).toBe("Pageable → Device");
    expect(memoryKinds({ src: null, dst: null })).toBe("");
  });
  it("draws one line per direction over the bins' middles", () => {
    const o = { edges: [0, 100, 200], H2D: [1, 2], D2H: [0, 4], weird: [5, 5] };
    expect(overTimeSeries(o)).toEqual(["H2D", "D2H", "weird"]);
    const opt = overTimeOption(o) as any;
    expect(opt.series.map((s: any) => s.name)).toEqual(["H2D", "D2H", "weird"]);
    expect(opt.series[0].data).toEqual([[50, 1], [150, 2]]);
    expect([opt.xAxis.min, opt.xAxis.max]).toEqual([0, 200]);
    const tip = opt.tooltip.formatter([{ dataIndex: 1, seriesName: EVIL, value: [150, 2], color: "#000" }]);
    expect(tip).toContain("2 GB/s");
    expect(tip).not.toContain("<img");
    expect((overTimeOption({ edges: [] }) as any).series).toEqual([]);
  });
  it("has the direction and copy columns", () => {
    const d = dir("H2D", "Pageable", "Device");
    expect(directionCols().map((c) => c.header)).toEqual(["Direction", "Source", "Destination", "Copies", "Bytes", "Time", "GB/s", "Median GB/s", "Min GB/s", "Max GB/s"]);
    expect(directionCols().map((c) => c.value(d))).toEqual(["H2D", "Pageable", "Device", 2, 2000, 1000, 2, 1.5, 1, 3]);
    const c: CopyRow = { name: EVIL, direction: "H2D", src: null, dst: null, device: 0, stream: 7, start_ns: 5, dur_ns: 10, bytes: -1, gbps: null, operator: null, step: null };
    const byId = Object.fromEntries(copyCols().map((col) => [col.id, col.value(c)]));
    expect(byId.bytes).toBeNull();
    expect(byId.operator).toBe("");
    const el = mount(<DataTable rows={[c]} cols={copyCols()} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
  });
});

describe("annotations", () => {
  it("shows the section only with host or device rows", () => {
    const empty: AnnotationsReply = { host: [], device: [], notes: ["no user annotations"] };
    expect(hasAnnotations(empty)).toBe(false);
    expect(hasAnnotations(null)).toBe(false);
    const row = { name: "fwd", count: 1, total_ns: 10, mean_ns: 10, max_ns: 10, kernels: 1, kernel_ns: 5 };
    expect(hasAnnotations({ ...empty, host: [row] })).toBe(true);
    expect(hasAnnotations({ ...empty, device: [{ ...row, device: 0 }] })).toBe(true);
  });
  it("has the host and device columns, names as text", () => {
    const row = { name: EVIL, count: 2, total_ns: 150000, mean_ns: 75000, max_ns: 100000, kernels: 3, kernel_ns: 110000 };
    expect(hostAnnotationCols().map((c) => c.value(row))).toEqual([EVIL, 2, 150000, 75000, 100000, 3, 110000]);
    const cols = deviceAnnotationCols("GPU");
    expect(cols[0].header).toBe("GPU");
    expect(cols.map((c) => c.value({ ...row, device: 1 }))).toEqual([1, EVIL, 2, 150000, 75000, 100000, 3, 110000]);
    const el = mount(<DataTable rows={[row]} cols={hostAnnotationCols()} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
  });
});

describe("launch queue", () => {
  const row = (extra: Partial<QueueStreamRow> = {}): QueueStreamRow => ({
    device: 0, stream: 7, operations: 9096, max_len: 570, mean_len: 101.25, time_full_ns: 0, blocked_calls: 0, blocked_ns: 0, ...extra,
  });
  it("has the per-stream columns, full_at in their hints", () => {
    const cols = queueCols("GPU", 1024);
    expect(cols.map((c) => c.header)).toEqual(["GPU", "Stream", "Operations", "Longest queue", "Mean queue", "Time full", "Blocked calls", "Blocked time"]);
    expect(cols.map((c) => c.value(row()))).toEqual([0, 7, 9096, 570, 101.25, 0, 0, 0]);
    expect(cols.find((c) => c.id === "full")!.title).toContain("1,024");
  });
  it("picks the streams whose queue filled up", () => {
    expect(fullStreams([row(), row({ stream: 8, time_full_ns: 5 }), row({ stream: 9, blocked_calls: 1 })]).map((r) => r.stream)).toEqual([8, 9]);
  });
});

describe("late arrivals", () => {
  const rank = (r: number, late: number, last = 0): LateRankRow => ({
    rank: r, worker: r === 2 ? EVIL : `rank${r}`, instances: 3, last, last_share: last / 3, late_ns: 3 * late,
    late_per_step_ns: late, late_max_ns: late, worst_step: 2, worst_step_late_ns: late,
  });
  it("has the per-rank and operator columns", () => {
    expect(lateRankCols().map((c) => c.value(rank(2, 100, 2)))).toEqual([2, EVIL, 3, 2, 100 * (2 / 3), 300, 100, 100, 2, 100]);
    const op = { rank: 2, name: "aten::mm", rank_ns: 126667, median_ns: 100000, excess_ns: 26667 };
    expect(lateOperatorCols().map((c) => c.value(op))).toEqual([2, "aten::mm", 126667, 100000, 26667]);
  });
  it("draws a bar per rank in the API's order, a window with a slider over many ranks", () => {
    const rows = [rank(2, 40000, 2), rank(0, 0), rank(1, 0)];
    const o = lateBarsOption(rows, rows.length, false) as any;
    expect(o.yAxis.data).toEqual(["rank 2", "rank 0", "rank 1"]);
    expect(o.series[0].data).toEqual([40000, 0, 0]);
    expect(o.dataZoom).toEqual([]);
    expect(o.yAxis.axisLabel.color(null, 0)).not.toBe(o.yAxis.axisLabel.color(null, 1));  // arrived last: red
    const tip = o.tooltip.formatter([{ dataIndex: 0 }]);
    expect(tip).not.toContain("<img");
    expect(tip).toContain("&lt;img");
    const many = Array.from({ length: 100 }, (_, i) => rank(i, 100 - i));
    const z = lateBarsOption(many, 40, true) as any;
    expect(z.dataZoom[0]).toMatchObject({ type: "slider", yAxisIndex: 0, startValue: 0, endValue: 39 });
    expect(z.yAxis.data).toHaveLength(100);
  });
  it("renders workers as text", () => {
    const el = mount(<DataTable rows={[rank(2, 1)]} cols={lateRankCols()} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
  });
});
