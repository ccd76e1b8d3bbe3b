// The many-rank Distributed sections' data: slowest-first order, outliers, the bars' parts,
// the step × rank heatmap (every cell, none binned), the bytes matrix, clock notes, and the
// ECharts options built from them (outliers marked, a window over long rank axes).
import { describe, expect, it } from "vitest";
import type { DistRanksReply, RankRow } from "../../api/types/distributed";
import type { Col } from "../../components/DataTable";
import { shownCols } from "./columns";
import { barsHeight, bytesMatrixOption, rankBarsOption, stepHeatmapOption } from "./charts";
import { barParts, bytesMatrix, clockNote, filterRanks, fitCount, orderRanks, outliers, rankLabel, rankRanges, stepHeatmap } from "./data";
import { instanceCols, SORT_OF } from "./Instances";

function row(rank: number, step_ns: number, extra: Partial<RankRow> = {}): RankRow {
  return {
    rank, worker: `rank${rank}`, steps: 3, step_ns, computation_ns: step_ns / 2, communication_ns: step_ns / 4,
    overlap_ns: step_ns / 8, other_ns: step_ns / 8, wait_ns: 10, transfer_ns: 20, clock_offset_ns: 0,
    clock_method: "baseTimeNanoseconds", outlier: false, outlier_reason: null, ...extra,
  };
}

describe("orderRanks", () => {
  it("follows the server's order, slowest first, then ranks it left out by step time", () => {
    const ranks = [row(0, 100), row(1, 300), row(2, 200), row(3, 250)];
    expect(orderRanks({ ranks, order: [1, 2] }).map((r) => r.rank)).toEqual([1, 2, 3, 0]);
    expect(orderRanks({ ranks, order: [] }).map((r) => r.rank)).toEqual([1, 3, 2, 0]);
  });
  it("ignores unknown and repeated ranks in the order", () => {
    expect(orderRanks({ ranks: [row(0, 1), row(1, 2)], order: [5, 1, 1, 0] }).map((r) => r.rank)).toEqual([1, 0]);
  });
});

describe("outliers and labels", () => {
  const straggler = row(7, 900, { outlier: true, outlier_reason: "step time 9.0× the median" });
  it("lists the flagged ranks with their reason", () => {
    expect(outliers([row(0, 1), straggler, row(2, 3)])).toEqual([straggler]);
    expect(rankLabel(straggler)).toBe("⚠ rank 7");
    expect(rankLabel(row(0, 1))).toBe("rank 0");
  });
  it("marks outliers on the bars' axis and in the tooltip, slowest on top", () => {
    const rows = [straggler, row(0, 100)];
    const opt = rankBarsOption(rows, "breakdown", 2, false);
    expect(opt.yAxis.inverse).toBe(true);
    expect(opt.yAxis.data).toEqual(["⚠ rank 7", "rank 0"]);
    expect(opt.yAxis.axisLabel.color(null, 0)).toBe("#c5221f");
    expect(opt.yAxis.axisLabel.color(null, 1)).not.toBe("#c5221f");
    const tip = opt.tooltip.formatter([{ dataIndex: 0, color: "#5470c6", seriesName: "Other", value: 5 }]);
    expect(tip).toContain("step time 9.0× the median");
    expect(opt.dataZoom).toEqual([]);
  });
  it("escapes names in the tooltip", () => {
    const opt = rankBarsOption([row(1, 5, { worker: "<img src=x onerror=alert(1)>", outlier: true, outlier_reason: "<b>x</b>" })], "wait", 1, true);
    const tip = opt.tooltip.formatter([{ dataIndex: 0, color: "#fff", seriesName: "Data transfer", value: 20 }]);
    expect(tip).not.toContain("<img");
    expect(tip).not.toContain("<b>x");
    expect(tip).toContain("&lt;img");
  });
});

describe("bars", () => {
  it("stacks the disjoint parts: computation and communication less their overlap", () => {
    expect(barParts(row(0, 800))).toEqual({ rank: 0, compOnly: 300, overlap: 100, commOnly: 100, other: 100 });
    expect(barParts(row(0, 800, { overlap_ns: null, other_ns: null }))).toEqual({ rank: 0, compOnly: 400, overlap: 0, commOnly: 200, other: 0 });
  });
  it("puts a slider over the ranks when not all are in view, starting at the slowest", () => {
    const rows = Array.from({ length: 1024 }, (_, i) => row(i, 1024 - i));
    const opt = rankBarsOption(rows, "breakdown", 40, false);
    expect(opt.dataZoom).toHaveLength(1);
    expect(opt.dataZoom[0]).toMatchObject({ yAxisIndex: 0, startValue: 0, endValue: 39 });
    expect(opt.series.map((s) => s.data.length)).toEqual([1024, 1024, 1024, 1024]);
    expect(barsHeight(40)).toBeGreaterThan(barsHeight(10));
  });
});

describe("stepHeatmap", () => {
  const m = { ranks: [0, 1, 2], steps: [5, 6], step_ns: [[10, 11], [30, null], [20, 21]] };
  it("keeps every known cell, counts the unknown ones, in rank order", () => {
    const h = stepHeatmap(m);
    expect(h.ranks).toEqual([0, 1, 2]);
    expect(h.steps).toEqual([5, 6]);
    expect(h.cells).toEqual([[0, 0, 10], [1, 0, 11], [0, 1, 30], [0, 2, 20], [1, 2, 21]]);
    expect(h.missing).toBe(1);
    expect([h.min, h.max]).toEqual([10, 30]);
  });
  it("orders the ranks slowest first when asked", () => {
    const h = stepHeatmap(m, [1, 2, 0]);
    expect(h.ranks).toEqual([1, 2, 0]);
    expect(h.cells[0]).toEqual([0, 0, 30]);
    expect(h.cells).toHaveLength(5);
  });
  it("gives every cell of 1,024 ranks × 50 steps to the chart, with a window over the ranks", () => {
    const big = { ranks: Array.from({ length: 1024 }, (_, i) => i), steps: Array.from({ length: 50 }, (_, i) => i + 1), step_ns: Array.from({ length: 1024 }, (_, r) => Array.from({ length: 50 }, (_, s) => 1000 + r + s)) };
    const h = stepHeatmap(big);
    expect(h.cells).toHaveLength(1024 * 50);
    const shown = fitCount(1024, 560, 10);
    expect(shown).toBe(56);
    const opt = stepHeatmapOption(h, new Map(), new Set([3]), shown, false);
    expect(opt.series[0].data).toBe(h.cells);
    expect(opt.dataZoom[0]).toMatchObject({ startValue: 0, endValue: 55 });
    expect(opt.yAxis.data[3]).toBe("⚠ rank 3");
    expect(opt.visualMap.min).toBe(1000);
    expect(opt.visualMap.max).toBe(1000 + 1023 + 49);
    expect(opt.tooltip.formatter({ value: [2, 3, 1234567] })).toContain("step 3");
  });
});

describe("bytesMatrix", () => {
  it("keeps the pairs that moved bytes (x: receiver, y: sender)", () => {
    const m = bytesMatrix([0, 1, 2], [[0, 100, null], [50, 0, 0], [0, 0, 0]]);
    expect(m.cells).toEqual([[1, 0, 100], [0, 1, 50]]);
    expect(m.max).toBe(100);
    expect(m.total).toBe(150);
    const opt = bytesMatrixOption(m, 3, false);
    expect(opt.tooltip.formatter({ value: [1, 0, 100] })).toContain("rank 0 → rank 1");
    expect(opt.dataZoom).toEqual([]);
  });
});

describe("words", () => {
  it("writes ranks in ranges", () => {
    expect(rankRanges([0, 1, 2, 3, 5, 7, 8, 10, 11, 12])).toBe("0–3, 5, 7, 8, 10–12");
    expect(rankRanges([])).toBe("");
  });
  it("shows a worker's bidi controls as markers in the tooltips, isolated", () => {
    const r = row(0, 1000, { worker: "evil\u202egpj" });
    const tip = (rankBarsOption([r], "breakdown", 1, false).tooltip.formatter as (p: unknown) => string)([{ dataIndex: 0, seriesName: "x", value: 1 }]);
    expect(tip).toContain("<bdi>evil⟨U+202E⟩gpj</bdi>");
    expect(tip).not.toContain("\u202e");
  });
  it("says which clocks were shifted and how", () => {
    expect(clockNote([row(0, 1), row(1, 1)])).toBeNull();
    const note = clockNote([row(0, 1), row(1, 1, { clock_offset_ns: -2500, clock_method: "collectives" }), row(2, 1, { clock_offset_ns: 1_000_000, clock_method: "collectives" })]);
    expect(note).toContain("2 of 3 ranks shifted");
    expect(note).toContain("2 by matching collectives across ranks");
    expect(note).toContain("largest shift 1 ms (rank 2)");
  });
});

describe("instances", () => {
  it("sorts on the server by skew, duration or bytes; wait/transfer columns only where given", () => {
    const base = { name: "nccl:all_reduce", family: "all_reduce", pg_name: "0", seq: 3, ranks: 16, first_arrival_ns: 0, last_arrival_ns: 5, skew_ns: 5, slowest_rank: 7, mean_duration_ns: 9, bytes: 4, algbw_min_gbps: 1, algbw_median_gbps: 2, busbw_min_gbps: 1, busbw_median_gbps: 2 };
    const ids = instanceCols([base]).map((c) => c.id);
    expect(ids).not.toContain("wait_ns");
    expect(Object.keys(SORT_OF).every((k) => ids.includes(k))).toBe(true);
    expect(instanceCols([{ ...base, wait_ns: 1, transfer_ns: 2 }]).map((c) => c.id)).toContain("wait_ns");
    expect(instanceCols([base]).find((c) => c.id === "seq")!.value({ ...base, seq: null, occurrence: 4 })).toBe(4);
  });
});

describe("the slowest-rank filter and the empty columns", () => {
  const rrow = (rank: number, step_ns: number) => ({ rank, worker: `w${rank}`, step_ns, overlap_ns: null as number | null });
  it("keeps the slowest rank, or the 8 slowest, in the server's order", () => {
    const reply = { ranks: Array.from({ length: 10 }, (_, i) => rrow(i, i * 10)), order: [3, 9, 8, 7, 6, 5, 4, 2, 1, 0] } as unknown as DistRanksReply;
    expect(filterRanks(reply, "all")).toBeNull();
    expect([...filterRanks(reply, "slowest")!]).toEqual([3]);
    expect([...filterRanks(reply, "slowest8")!]).toEqual([3, 9, 8, 7, 6, 5, 4, 2]);
    expect(filterRanks(null, "slowest")).toBeNull();
    expect([...filterRanks(reply, "late", 7)!]).toEqual([7]); // the straggler, whatever its step time
    expect(filterRanks(reply, "late", null)).toBeNull();
  });
  it("hides a column empty in every row, never the rank", () => {
    const cols: Col<ReturnType<typeof rrow>>[] = [
      { id: "rank", header: "Rank", value: () => null },
      { id: "step_ns", header: "Step", value: (r) => r.step_ns },
      { id: "overlap_ns", header: "Overlap", value: (r) => r.overlap_ns },
    ];
    expect(shownCols(cols, [rrow(0, 5), rrow(1, 6)]).map((c) => c.id)).toEqual(["rank", "step_ns"]);
    expect(shownCols(cols, [rrow(0, 5), { ...rrow(1, 6), overlap_ns: 0 }]).map((c) => c.id)).toEqual(["rank", "step_ns", "overlap_ns"]);
    expect(shownCols(cols, []).length).toBe(3);
  });
});
