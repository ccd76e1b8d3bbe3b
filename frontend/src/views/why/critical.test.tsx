// @vitest-environment jsdom
// The critical path section's pure parts: the stacked bars per step (device / host / sync /
// other adding up to the step, "off the path" only when some step is not covered), the mean
// shares' headline, a step's window from its segments, the segments -> the timeline's
// highlight (event ids and spans), the kinds' grouping and colors, and the URL key cp.
import { describe, expect, it } from "vitest";
import { parseState, STATE_KEYS } from "../../state/url";
import { HIGHLIGHT_STRIP_H, highlightColor } from "../../timeline/Timeline";
import {
  headline, highlightFromSegments, meanShares, offPath, partOf, pathBarsOption, stepWindow, TOP_COLS,
  type CriticalSegment, type CriticalStepRow,
} from "./CriticalPath";

const EVIL = `<img src=x onerror="window.__pwned=1">`;

function step(n: number, device: number, host: number, sync = 0, other = 0, length?: number): CriticalStepRow {
  const path = device + host + sync + other;
  const len = length ?? path;
  return { step: n, length_ns: len, path_ns: path, device_ns: device, host_ns: host, sync_ns: sync, other_ns: other, device_share: device / len };
}

function seg(kind: string, start: number, end: number, row: number, s = 5): CriticalSegment {
  return { step: s, kind, start_ns: start, end_ns: end, dur_ns: end - start, row, name: row >= 0 ? `ev${row}` : null, operator: null };
}

describe("critical path bars", () => {
  it("stacks device, host, sync and other, adding up to each step", () => {
    const rows = [step(5, 68750000, 118944000, 254000), step(6, 100, 300, 0, 0)];
    const opt = pathBarsOption(rows) as any;
    expect(opt.xAxis.data).toEqual(["5", "6"]);
    expect(opt.series.map((s: any) => s.name)).toEqual(["Device", "Host", "Sync", "Other"]);
    expect(opt.series.every((s: any) => s.stack === "path")).toBe(true);
    rows.forEach((r, j) => expect(opt.series.reduce((a: number, s: any) => a + s.data[j], 0)).toBe(r.length_ns));
    expect(opt.series[0].data).toEqual([68750000, 100]);
    expect(opt.series[2].data).toEqual([254000, 0]);
  });
  it("adds what the path does not cover as its own part", () => {
    const rows = [step(1, 100, 200, 0, 0, 400), step(2, 50, 50)];
    expect(offPath(rows[0])).toBe(100);
    expect(offPath(rows[1])).toBe(0);
    const opt = pathBarsOption(rows) as any;
    expect(opt.series.map((s: any) => s.name)).toContain("Off the path");
    rows.forEach((r, j) => expect(opt.series.reduce((a: number, s: any) => a + s.data[j], 0)).toBe(r.length_ns));
  });
  it("escapes the tooltip and formats durations", () => {
    const opt = pathBarsOption([step(3, 1000, 3000)]) as any;
    const tip = opt.tooltip.formatter([{ dataIndex: 0 }]);
    expect(tip).toContain("Step 3");
    expect(tip).toContain("75.0%");
  });
  it("headlines the mean device and host shares", () => {
    const s = meanShares([step(1, 37, 63), step(2, 37, 63)])!;
    expect(s.device).toBeCloseTo(37);
    expect(s.host).toBeCloseTo(63);
    expect(headline(s)).toBe("device-bound 37 % of the path, host-bound 63 %");
    expect(meanShares([])).toBeNull();
  });
  it("keeps names as table text (the top table's columns)", () => {
    const r = { kind: "host", name: EVIL, ns: 1000, count: 2 };
    expect(TOP_COLS.map((c) => c.value(r))).toEqual(["host", EVIL, 1000, 2]);
  });
});

describe("segments -> highlight", () => {
  const segs = [
    seg("host", 156000, 69072000, -1),
    seg("runtime", 69072000, 69232000, 538),
    seg("device", 69232000, 71172000, 539),
    seg("device_gap", 71172000, 71180000, -1),
    seg("sync", 71180000, 71238000, 540),
    seg("device", 71238000, 71300000, 539), // an event twice on the path counts once
    seg("launch", 71300000, 71300000, -1), // empty: no span
  ];
  it("outlines every event on the path and keeps every segment as a span", () => {
    const { ids, spans } = highlightFromSegments(segs);
    expect([...ids].sort()).toEqual([538, 539, 540]);
    expect(spans).toHaveLength(6);
    expect(spans[0]).toEqual({ start: 156000, end: 69072000, kind: "host" });
    expect(spans.filter((s) => s.kind === "device_gap")).toHaveLength(1);
  });
  it("takes the step's window from its first start to its last end", () => {
    expect(stepWindow(segs)).toEqual({ start: 156000, end: 71300000 });
    expect(stepWindow([...segs, seg("host", 0, 10, -1, 6)], 5)).toEqual({ start: 156000, end: 71300000 });
    expect(stepWindow([])).toBeNull();
  });
  it("groups the kinds as the summary does and colors them apart", () => {
    expect(["device", "device_gap"].map(partOf)).toEqual(["device", "device"]);
    expect(["host", "launch", "runtime", "tail"].map(partOf)).toEqual(["host", "host", "host", "host"]);
    expect(partOf("sync")).toBe("sync");
    expect(partOf("other")).toBe("other");
    for (const dark of [false, true]) {
      const c = ["device", "host", "sync", "other"].map((k) => highlightColor(k, dark));
      expect(new Set(c).size).toBe(4);
      expect(highlightColor(null, dark)).toBe(highlightColor("host", dark)); // the outline: orange
    }
    expect(HIGHLIGHT_STRIP_H).toBeGreaterThan(0);
  });
  it("keeps the step in the URL as cp", () => {
    expect(STATE_KEYS).toContain("cp");
    expect(parseState("#view=Trace&cp=5&t0=1&t1=2")).toMatchObject({ view: "Trace", cp: "5", t0: "1", t1: "2" });
  });
});
