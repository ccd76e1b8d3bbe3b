// ECharts options of the many-rank Distributed sections: per-rank stacked bars (slowest
// on top, a slider over the rank axis), the step × rank heatmap and the rank × rank bytes
// matrix. Every label and tooltip from untrusted text is escaped, isolated and shows its bidi
// controls as markers (util/escape: nameHtml); value axes have nice ticks (util/ticks).

import type { RankRow } from "../../api/types/distributed";
import { rowTooltip, TOOLTIP_BASE } from "../../components/Chart";
import { escapeHtml, nameHtml, tooltipLine } from "../../util/escape";
import { fmtBytes, fmtDuration } from "../../util/format";
import { stackedExtent, valueAxis } from "../../util/ticks";
import { barParts, rankLabel, type BytesMatrix, type Heatmap } from "./data";

export type BarMode = "breakdown" | "wait";

const BAR_SERIES: Record<BarMode, { name: string; color: string; value: (r: RankRow) => number }[]> = {
  breakdown: [
    { name: "Computation (not overlapped)", color: "#5470c6", value: (r) => barParts(r).compOnly },
    { name: "Overlapped", color: "#91cc75", value: (r) => barParts(r).overlap },
    { name: "Communication (not overlapped)", color: "#ee6666", value: (r) => barParts(r).commOnly },
    { name: "Other", color: "#aaaaaa", value: (r) => barParts(r).other },
  ],
  wait: [
    { name: "Data transfer", color: "#73c0de", value: (r) => Math.max(0, r.transfer_ns ?? 0) },
    { name: "Synchronizing (waiting)", color: "#fc8452", value: (r) => Math.max(0, r.wait_ns ?? 0) },
  ],
};

/** Pixels per bar and the chart's frame around the bars. */
export const BAR_PX = 18;
const BAR_FRAME = 90;

export function barsHeight(shown: number): number {
  return shown * BAR_PX + BAR_FRAME;
}

const OUTLIER_COLOR = "#c5221f";

/** Horizontal stacked bars, one per rank in the given order (slowest first, on top); `shown` ranks in the window. */
export function rankBarsOption(rows: RankRow[], mode: BarMode, shown: number, dark: boolean) {
  const series = BAR_SERIES[mode];
  const zoom = shown < rows.length;
  return {
    tooltip: rowTooltip(rows, (r, ps) => {
      const lines = ps.map((p: any) => tooltipLine(String(p.color ?? "#888"), p.seriesName, fmtDuration(Number(p.value))));
      const head = `<div class="tt-title">rank ${r.rank} · ${nameHtml(r.worker)}</div>`;
      const step = tooltipLine("#888", "Step time", fmtDuration(r.step_ns));
      const why = r.outlier ? `<div class="tt-warn">⚠ ${escapeHtml(r.outlier_reason ?? "outlier")}</div>` : "";
      return head + [step, ...lines].join("<br>") + why;
    }),
    legend: { top: 0 },
    grid: { left: 90, right: zoom ? 56 : 24, top: 30, bottom: 44 },
    xAxis: valueAxis(...stackedExtent(series.map((s) => rows.map((r) => s.value(r)))), "duration", { extra: { name: "mean per step", nameLocation: "middle", nameGap: 26 } }),
    yAxis: {
      type: "category",
      inverse: true,
      data: rows.map((r) => rankLabel(r)),
      axisLabel: { color: (_: unknown, i: number) => (rows[i]?.outlier ? OUTLIER_COLOR : dark ? "#c8c8c8" : "#444") },
    },
    dataZoom: zoom
      ? [{ type: "slider", yAxisIndex: 0, startValue: 0, endValue: shown - 1, right: 8, width: 18, showDetail: false, filterMode: "filter" }]
      : [],
    series: series.map((s) => ({
      name: s.name,
      type: "bar",
      stack: "t",
      barMaxWidth: 16,
      itemStyle: { color: s.color },
      emphasis: { focus: "series" },
      data: rows.map((r) => s.value(r)),
    })),
  };
}

const HEAT_COLORS = ["#fff5eb", "#fdd49e", "#fc8d59", "#d7301f", "#7f0000"];

/** The step × rank heatmap (x: steps, y: ranks top to bottom), `shown` ranks in the window. */
export function stepHeatmapOption(h: Heatmap, workers: Map<number, string>, outlierRanks: Set<number>, shown: number, dark: boolean) {
  const zoom = shown < h.ranks.length;
  return {
    tooltip: {
      ...TOOLTIP_BASE,
      trigger: "item",
      formatter: (p: any) => {
        const [x, y, v] = p.value as [number, number, number];
        const rank = h.ranks[y];
        return (
          `<div class="tt-title">rank ${rank} · ${nameHtml(workers.get(rank) ?? "")}</div>` +
          tooltipLine("#888", `step ${h.steps[x]}`, fmtDuration(v))
        );
      },
    },
    grid: { left: 90, right: zoom ? 56 : 24, top: 64, bottom: 40 },
    xAxis: { type: "category", name: "step", nameLocation: "middle", nameGap: 24, data: h.steps.map(String), splitArea: { show: false } },
    yAxis: {
      type: "category",
      inverse: true,
      data: h.ranks.map((r) => `${outlierRanks.has(r) ? "⚠ " : ""}rank ${r}`),
      axisLabel: { color: (_: unknown, i: number) => (outlierRanks.has(h.ranks[i]) ? OUTLIER_COLOR : dark ? "#c8c8c8" : "#444") },
    },
    visualMap: {
      type: "continuous",
      min: h.min,
      max: h.max > h.min ? h.max : h.min + 1,
      calculable: true,
      orient: "horizontal",
      top: 0,
      right: 24,
      itemHeight: 160,
      text: ["slow", "fast"],
      formatter: (v: number) => fmtDuration(v),
      inRange: { color: HEAT_COLORS },
      textStyle: { color: dark ? "#c8c8c8" : "#444" },
    },
    dataZoom: zoom
      ? [{ type: "slider", yAxisIndex: 0, startValue: 0, endValue: shown - 1, right: 8, width: 18, showDetail: false, filterMode: "filter" }]
      : [],
    series: [{ type: "heatmap", name: "Step time", data: h.cells, progressive: 20000, emphasis: { itemStyle: { borderColor: "#000", borderWidth: 1 } } }],
  };
}

/** The rank × rank bytes matrix (y: sender, x: receiver), `shown` ranks per axis in the window. */
export function bytesMatrixOption(m: BytesMatrix, shown: number, dark: boolean) {
  const zoom = shown < m.ranks.length;
  const cats = m.ranks.map((r) => `rank ${r}`);
  const window = { startValue: 0, endValue: shown - 1, showDetail: false, filterMode: "filter" };
  return {
    tooltip: {
      ...TOOLTIP_BASE,
      trigger: "item",
      formatter: (p: any) => {
        const [x, y, v] = p.value as [number, number, number];
        return tooltipLine("#888", `rank ${m.ranks[y]} → rank ${m.ranks[x]}`, fmtBytes(v));
      },
    },
    grid: { left: 90, right: zoom ? 56 : 24, top: 64, bottom: zoom ? 80 : 56 },
    xAxis: { type: "category", name: "to rank", nameLocation: "middle", nameGap: 36, data: cats, axisLabel: { rotate: 30 } },
    yAxis: { type: "category", name: "from rank", nameLocation: "middle", nameGap: 70, inverse: true, data: cats },
    visualMap: {
      type: "continuous",
      min: 0,
      max: m.max || 1,
      calculable: true,
      orient: "horizontal",
      top: 0,
      right: 24,
      itemHeight: 160,
      formatter: (v: number) => fmtBytes(Math.round(v)),
      inRange: { color: ["#e0f3f8", "#74add1", "#313695"] },
      textStyle: { color: dark ? "#c8c8c8" : "#444" },
    },
    dataZoom: zoom
      ? [
          { type: "slider", yAxisIndex: 0, right: 8, width: 18, ...window },
          { type: "slider", xAxisIndex: 0, bottom: 8, height: 18, ...window },
        ]
      : [],
    series: [{ type: "heatmap", name: "Bytes", data: m.cells, progressive: 20000 }],
  };
}
