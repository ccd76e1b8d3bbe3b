// Axis ticks (util/ticks) and the charts that use them: every value axis shows multiples of
// a step of 1, 2, 2.5 or 5 × 10^k in its one unit (ns/µs/ms/s, B/KiB/MiB/GiB), never a
// value like "1.2345 ms" or "37.77 MiB".
import { describe, expect, it } from "vitest";
import type { RankRow } from "../api/types/distributed";
import type { LateRankRow, StepOutliersReply } from "../api/types/why";
import { pieChartOption } from "../components/pie";
import { rankBarsOption } from "../views/distributed/charts";
import { lateBarsOption } from "../views/distributed/LateArrivals";
import { pathBarsOption } from "../views/why/CriticalPath";
import { idleBarsOption } from "../views/why/IdleTime";
import { binPosition, histogramOption } from "../views/why/Launches";
import { overTimeOption } from "../views/why/Memcpy";
import { stepBarsOption } from "../views/why/StepTime";
import { timeAxisTicks } from "../views/Memory";
import { extentOf, logTicks, niceAxis, niceStep, stackedExtent, valueAxis } from "./ticks";

const MiB = 1024 ** 2;
const UNITS: Record<string, number> = { ns: 1, "µs": 1e3, ms: 1e6, s: 1e9, B: 1, KiB: 1024, MiB, GiB: 1024 ** 3, TiB: 1024 ** 4, "": 1 };

/** "2.5 ms" -> [2.5, "ms"]; "1,500" -> [1500, ""]. */
function parseLabel(s: string): [number, string] {
  const m = /^([+-]?[\d,]*\.?\d+)(?: (\S+))?$/.exec(s);
  if (!m) throw new Error(`not a tick label: ${JSON.stringify(s)}`);
  return [Number(m[1].replace(/,/g, "")), m[2] ?? ""];
}

function isNiceStep(x: number): boolean {
  const p = 10 ** Math.floor(Math.log10(x) + 1e-9);
  return [1, 2, 2.5, 5, 10].some((m) => Math.abs(x / p - m) < 1e-6);
}

/** The labels an ECharts value axis option draws, checked: one unit, nice step, multiples of it. */
function niceLabels(axis: any): string[] {
  expect(axis.type).toBe("value");
  const values: number[] = axis.axisLabel.customValues;
  expect(values.length).toBeGreaterThanOrEqual(2);
  const labels = values.map((v: number) => axis.axisLabel.formatter(v));
  const parsed = labels.map(parseLabel);
  const units = new Set(parsed.map(([, u]) => u));
  expect(units.size, `one unit per axis: ${labels.join(", ")}`).toBe(1);
  const nums = parsed.map(([x]) => x);
  const step = nums[1] - nums[0];
  expect(isNiceStep(step), `step ${step} of ${labels.join(", ")}`).toBe(true);
  for (let i = 0; i < nums.length; i++) {
    expect(nums[i] / step - Math.round(nums[i] / step), labels[i]).toBeCloseTo(0, 6);
    // what the label says is the tick's value
    expect(nums[i] * UNITS[parsed[i][1]], labels[i]).toBeCloseTo(values[i], -Math.log10(UNITS[parsed[i][1]]) + 3);
  }
  return labels;
}

describe("niceStep", () => {
  it("is 1, 2, 2.5 or 5 × 10^k, the first at least the raw step", () => {
    expect(niceStep(0.7)).toBe(1);
    expect(niceStep(1.1)).toBe(2);
    expect(niceStep(2.2)).toBe(2.5);
    expect(niceStep(0.3)).toBe(0.5);
    expect(niceStep(0.24)).toBe(0.25);
    expect(niceStep(130)).toBe(200);
    expect(niceStep(7e6)).toBe(1e7);
    // whole numbers: no 2.5, nothing under 1
    expect(niceStep(2.2, true)).toBe(5);
    expect(niceStep(0.2, true)).toBe(1);
    expect(niceStep(22, true)).toBe(25);
  });
});

describe("niceAxis", () => {
  it("durations: one unit for the axis, nice steps in it", () => {
    const a = niceAxis(0, 1_234_500, "duration");
    expect(a.unit.suffix).toBe("ms");
    expect(a.step).toBe(250_000);
    expect(a.ticks.map(a.format)).toEqual(["0 ms", "0.25 ms", "0.5 ms", "0.75 ms", "1 ms", "1.25 ms"]);
    expect(a.max).toBe(1_250_000);
    expect(niceAxis(0, 37_770, "duration").ticks.map((v) => niceAxis(0, 37_770, "duration").format(v))).toEqual(
      ["0 µs", "10 µs", "20 µs", "30 µs", "40 µs"]);
    expect(niceAxis(0, 3.2e9, "duration").format(1e9)).toBe("1 s");
    expect(niceAxis(0, 7, "duration").step).toBe(2); // whole ns
  });
  it("bytes: powers of 1024, nice in the unit", () => {
    const a = niceAxis(0, 37.77 * MiB, "bytes");
    expect(a.unit.suffix).toBe("MiB");
    expect(a.ticks.map(a.format)).toEqual(["0 MiB", "10 MiB", "20 MiB", "30 MiB", "40 MiB"]);
    const g = niceAxis(0, 2.3 * 1024 ** 3, "bytes");
    expect(g.ticks.map(g.format)).toEqual(["0 GiB", "0.5 GiB", "1 GiB", "1.5 GiB", "2 GiB", "2.5 GiB"]);
    expect(g.step).toBe(0.5 * 1024 ** 3);
    expect(niceAxis(0, 700, "bytes").format(200)).toBe("200 B");
  });
  it("an exact axis keeps its ends, labels only the nice values inside", () => {
    const a = niceAxis(1_234_567, 9_876_543, "duration", { exact: true });
    expect([a.min, a.max]).toEqual([1_234_567, 9_876_543]);
    expect(a.ticks[0]).toBe(2_000_000);
    expect(a.ticks.at(-1)).toBe(8_000_000);
    expect(a.format(1_234_567)).toBe("");
    expect(a.format(4_000_000)).toBe("4 ms");
  });
  it("negative and signed values, counts, degenerate extents", () => {
    const d = niceAxis(-1_300, 4_100, "duration", { signed: true });
    expect(d.ticks.map(d.format)).toEqual(["-2 µs", "0 µs", "+2 µs", "+4 µs", "+6 µs"]);
    expect(niceAxis(0, 3, "count").step).toBe(1);
    expect(niceAxis(0, 0, "duration").ticks.length).toBeGreaterThan(1);
    expect(niceAxis(5, 5, "number").min).toBe(0);
  });
  it("extents of values and of stacked bars", () => {
    expect(extentOf([3, null, 7, undefined, NaN])).toEqual([0, 7]);
    expect(extentOf([3, 7], false)).toEqual([3, 7]);
    expect(stackedExtent([[1, 2], [3, -4], [5, 1]])).toEqual([-4, 9]);
  });
  it("log ticks: 1, 2, 5 × 10^k, or decades across many", () => {
    expect(logTicks(900, 12_000)).toEqual([1000, 2000, 5000, 10_000]);
    expect(logTicks(1, 1e9, 8)).toEqual([1, 100, 1e4, 1e6, 1e8]);
    expect(binPosition([1000, 2000, 4000], 2000)).toBe(1);
    expect(binPosition([1000, 2000, 4000], 3000)).toBeCloseTo(1 + Math.log(1.5) / Math.log(2));
    expect(binPosition([1000, 2000], 5000)).toBeNull();
  });
});

describe("chart value axes", () => {
  it("valueAxis draws the nice ticks and their labels", () => {
    expect(niceLabels(valueAxis(0, 1_234_500, "duration"))).toEqual(["0 ms", "0.25 ms", "0.5 ms", "0.75 ms", "1 ms", "1.25 ms"]);
    expect(niceLabels(valueAxis(0, 37.77 * MiB, "bytes")).at(-1)).toBe("40 MiB");
  });
  it("the Operator / Kernel bars (a nested 'pie')", () => {
    const { option } = pieChartOption("Host total time", [
      { name: "ProfilerStep#1", value_ns: 1_234_567 }, { name: "aten::mm", value_ns: 377_000 },
    ], { fmt: String, nested: true });
    expect(niceLabels(option.xAxis)).toContain("1.25 ms");
  });
  it("the step, idle and critical path bars", () => {
    const steps = [1, 2, 3].map((k) => ({ step: k, name: `ProfilerStep#${k}`, start_ns: 0, dur_ns: 1_000_000 + k * 123_457, ratio: 1, outlier: false }));
    const d: StepOutliersReply = { steps, stats: null, outliers: [], median_step: {}, notes: [] };
    niceLabels(stepBarsOption(d).yAxis);
    const idle = [1, 2].map((k) => ({ device: 0, stream: 7, step: k, window_ns: 3_777_777, busy_ns: 2_000_001, idle_ns: 1_777_776, host_wait_ns: 1_000_000, kernel_wait_ns: 500_000, other_ns: 277_776, gaps: 3 }));
    niceLabels(idleBarsOption(idle, "GPU").yAxis);
    const path = [{ step: 1, length_ns: 9_876_543, path_ns: 9_876_543, device_ns: 5_000_000, host_ns: 3_000_000, sync_ns: 1_000_000, other_ns: 876_543, device_share: 0.5 }];
    niceLabels(pathBarsOption(path).yAxis);
  });
  it("the Distributed bars", () => {
    const rank = (k: number): RankRow => ({
      rank: k, worker: `w${k}`, steps: 3, step_ns: 3_333_333 * (k + 1), computation_ns: 2_222_222 * (k + 1), communication_ns: 1_111_111,
      overlap_ns: 555_555, other_ns: 123_456, wait_ns: 10, transfer_ns: 20, clock_offset_ns: 0, clock_method: null, outlier: false, outlier_reason: null,
    });
    niceLabels(rankBarsOption([rank(0), rank(1)], "breakdown", 2, false).xAxis);
    const late: LateRankRow[] = [0, 1].map((k) => ({
      rank: k, worker: `w${k}`, instances: 4, last: k, last_share: 0.5, late_ns: 4_567_891, late_per_step_ns: 1_234_567 * (k + 1),
      late_max_ns: 3_000_000, worst_step: 1, worst_step_late_ns: 3_000_000,
    }));
    niceLabels(lateBarsOption(late, 2, false).xAxis);
  });
  it("the copy bandwidth over time and the launch histograms", () => {
    const o = overTimeOption({ edges: [1_234_567, 5_234_567, 9_234_567], H2D: [12.345, 3.21] } as any);
    expect(o.xAxis.min).toBe(1_234_567);
    niceLabels(o.xAxis);
    niceLabels(o.yAxis);
    const h = histogramOption({ edges: [1234, 5678, 23_456, 98_765], counts: [3, 17, 2] }, "Kernel duration", "#888") as any;
    niceLabels(h.yAxis);
    const bins = h.xAxis.tbBinTicks;
    expect(bins.tbTicks.values).toEqual([2000, 5000, 10_000, 20_000, 50_000]);
    expect(bins.axisLabel.customValues.map((p: number) => bins.axisLabel.formatter(p))).toEqual(["2 µs", "5 µs", "10 µs", "20 µs", "50 µs"]);
  });
  it("the memory curve's time axis follows the range shown", () => {
    const whole = timeAxisTicks(1_234_567, 98_765_432);
    expect(whole.axisLabel.customValues.map(whole.axisLabel.formatter)).toEqual(["20 ms", "40 ms", "60 ms", "80 ms"]);
    const zoomed = timeAxisTicks(12_345_678, 13_456_789);
    expect(zoomed.axisLabel.customValues.map(zoomed.axisLabel.formatter)).toEqual(["12.4 ms", "12.6 ms", "12.8 ms", "13 ms", "13.2 ms", "13.4 ms"]);
  });
});
