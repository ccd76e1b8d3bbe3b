// @vitest-environment jsdom
// The "Why is the step slow" sections' pure parts: the factor and threshold controls'
// values, the charts' options (what they draw, escaped tooltips), the tables' columns,
// and untrusted names rendered as text.
import { describe, expect, it } from "vitest";
import type { IdleReply, IdleRow, LaunchesReply, OutlierStep, StepOutliersReply } from "../../api/types/why";
import { DataTable } from "../../components/DataTable";
import { deviceSteps, deviceTotals, gapCols, idleBarsOption, idleCols, share, THRESHOLDS } from "./IdleTime";
import { binLabels, callCols, histogramOption, operatorCols, OUTSIDE_OPS, outlierCols as launchOutlierCols } from "./Launches";
import { causeDelta, factorLabel, factorPct, FACTORS, outlierCategories, outlierCols, stepBarsOption } from "./StepTime";
import { mount } from "../../testing/mount";


const EVIL = `<img src=x onerror="window.__pwned=1">`;

function idleRow(device: number, stream: number, step: number, extra: Partial<IdleRow> = {}): IdleRow {
  return {
    device, stream, step, window_ns: 1000, busy_ns: 600, idle_ns: 400, host_wait_ns: 250, kernel_wait_ns: 100,
    other_ns: 50, gaps: 3, ...extra,
  };
}

const OUTLIER: OutlierStep = {
  step: 16, name: EVIL, dur_ns: 171772000, ratio: 1.1295, excess_ns: 19699000, cause: "dataloader",
  cause_label: "DataLoader", kernel_ns: 98420000, kernel_delta_ns: -105500, dataloader_ns: 46723000,
  dataloader_delta_ns: 13209500,
};

const STEPS: StepOutliersReply = {
  steps: [
    { step: 16, name: EVIL, start_ns: 0, dur_ns: 171772000, ratio: 1.1295, outlier: true },
    { step: 17, name: "ProfilerStep#17", start_ns: 171915000, dur_ns: 149553000, ratio: 0.98, outlier: false },
    { step: 18, name: "ProfilerStep#18", start_ns: 321468000, dur_ns: 152073000, ratio: 1, outlier: false },
  ],
  stats: { steps: 3, mean_ns: 157799333, median_ns: 152073000, p90_ns: 167832200, min_ns: 149553000, max_ns: 171772000, factor: 1.05 },
  outliers: [OUTLIER],
  median_step: { kernel_ns: 98525500, dataloader_ns: 33513500 },
  notes: [],
};


describe("step time", () => {
  it("reads a typed factor as factor_pct within the route's range", () => {
    expect(factorPct("1.05")).toBe(105);
    expect(factorPct(" 2 × ")).toBe(200);
    expect(factorPct("1")).toBeNull();
    expect(factorPct("101")).toBeNull();
    expect(factorPct("abc")).toBeNull();
    expect(factorLabel(125)).toBe("1.25 ×");
    expect(FACTORS.map((f) => f.value)).toEqual(["125", "150", "200", "300", "custom"]);
  });
  it("draws one bar per step, outliers red, with the median and mean lines", () => {
    const o = stepBarsOption(STEPS) as any;
    expect(o.xAxis.data).toEqual(["16", "17", "18"]);
    expect(o.series[0].data.map((x: any) => x.value)).toEqual([171772000, 149553000, 152073000]);
    expect(o.series[0].data[0].itemStyle.color).not.toBe(o.series[0].data[1].itemStyle.color);
    expect(o.series[0].markLine.data.map((l: any) => [l.name, l.yAxis])).toEqual([["Median", 152073000], ["Mean", 157799333]]);
    const tip = o.tooltip.formatter([{ dataIndex: 0 }]);
    expect(tip).not.toContain("<img");
    expect(tip).toContain("&lt;img");
    expect(tip).toContain("outlier");
  });
  it("takes the cause's delta and every category of an outlier", () => {
    expect(causeDelta(OUTLIER)).toBe(13209500);
    expect(causeDelta({ ...OUTLIER, cause: null })).toBeNull();
    expect(outlierCategories(OUTLIER).sort()).toEqual(["dataloader", "kernel"]);
    const cols = outlierCols();
    expect(cols.map((c) => c.header)).toEqual(["Step", "Name", "Step time", "× median", "Excess", "Cause", "Cause Δ"]);
    expect(cols.map((c) => c.value(OUTLIER))).toEqual([16, EVIL, 171772000, 1.1295, 19699000, "DataLoader", 13209500]);
  });
  it("renders step names as text", () => {
    const el = mount(<DataTable rows={[OUTLIER]} cols={outlierCols()} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
  });
});

describe("idle time", () => {
  const reply: IdleReply = {
    devices: [idleRow(1, -1, -1), idleRow(0, -1, 2), idleRow(0, -1, 1), idleRow(0, -1, -1, { window_ns: 2000 }), idleRow(1, -1, 1)],
    streams: [idleRow(0, 7, -1), idleRow(0, 7, 1)],
    gaps: [{ device: 0, stream: -1, step: 1, start_ns: 5, end_ns: 105, dur_ns: 100, kind: "host_wait" }],
    gaps_total: 1,
    threshold_ns: 30000,
    notes: [],
  };
  it("picks the totals (step -1) per device and one device's steps in order", () => {
    expect(deviceTotals(reply).map((r) => r.device)).toEqual([0, 1]);
    expect(deviceTotals(reply)[0].window_ns).toBe(2000);
    expect(deviceSteps(reply, 0).map((r) => r.step)).toEqual([1, 2]);
    expect(deviceTotals({ ...reply, devices: [] })).toEqual([]);
    expect(share(1, 4)).toBe(25);
    expect(share(1, 0)).toBeNull();
    expect(THRESHOLDS.map((t) => Number(t.value))).toEqual([10000, 30000, 100000]);
  });
  it("stacks busy, host wait, kernel wait and other per step: they add up to the window", () => {
    const rows = deviceSteps(reply, 0);
    const o = idleBarsOption(rows, "GPU") as any;
    expect(o.series.map((s: any) => s.name)).toEqual(["Busy", "Host wait", "Kernel wait", "Other"]);
    for (let i = 0; i < rows.length; i++) {
      expect(o.series.reduce((a: number, s: any) => a + s.data[i], 0)).toBe(rows[i].window_ns);
    }
    expect(o.tooltip.formatter([{ dataIndex: 0 }])).toContain("GPU 0, step 1");
  });
  it("has the tables' columns", () => {
    expect(idleCols("GPU", true).map((c) => c.header)).toEqual(
      ["GPU", "Stream", "Steps' window", "Busy", "Idle", "Idle share", "Host wait", "Kernel wait", "Other", "Gaps"]);
    expect(idleCols("GPU", false).map((c) => c.id)).not.toContain("stream");
    expect(gapCols("GPU").map((c) => c.value(reply.gaps[0]))).toEqual(["Host wait", 0, "all", 1, 5, 100]);
  });
});

describe("launches", () => {
  const h = { edges: [1000, 2000, 4000], counts: [3, 5] };
  it("labels the log-spaced bins and draws their counts; empty histograms draw nothing", () => {
    expect(binLabels(h)).toEqual(["1 µs – 2 µs", "2 µs – 4 µs"]);
    const o = histogramOption(h, "Kernel duration", "#5470c6") as any;
    expect(o.series[0].data).toEqual([3, 5]);
    // the bins' edges (1, 2, 4 µs) are no ticks: the nice times are, where they fall
    expect(o.xAxis.tbBinTicks.tbTicks).toEqual({ values: [1000, 2000], positions: [0, 1] });
    expect(o.xAxis.tbBinTicks.axisLabel.formatter(1)).toBe("2 µs");
    expect(o.tooltip.formatter([{ dataIndex: 1 }])).toContain("5");
    expect((histogramOption({ edges: [], counts: [] }, "x", "#888") as any).series[0].data).toEqual([]);
    expect(histogramOption(h, EVIL, "#888").tooltip.formatter([{ dataIndex: 0 }])).not.toContain("<img");
  });
  it("has the per-call, outlier and operator columns", () => {
    expect(callCols()[0].header).toBe("Launch call");
    const ops = operatorCols();
    const row = { operator: null, launches: 2, call_ns: 30, kernel_ns: 10, delay_median_ns: 5, overhead_share: 0.75 };
    expect(ops.map((c) => c.value(row))).toEqual([OUTSIDE_OPS, 2, 30, 10, 5, 75]);
    expect(launchOutlierCols().map((c) => c.id)).toContain("reason");
  });
  it("renders kernel and operator names as text", () => {
    const d: Pick<LaunchesReply, "operators"> = { operators: [{ operator: EVIL, launches: 1, call_ns: 1, kernel_ns: 1, delay_median_ns: 1, overhead_share: 0.5 }] };
    const el = mount(<DataTable rows={d.operators} cols={operatorCols()} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
  });
});
