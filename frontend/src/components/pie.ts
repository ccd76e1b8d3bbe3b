// The option behind the views' "pies" (Operator, Kernel), as a pure function so that what
// a chart shows can be tested:
// - legend names are shortened in the middle, never into duplicates (two long names that
//   share a prefix keep their distinct ends), and the legend's tooltip holds the whole name;
// - an "Other" slice above OTHER_MAX of the total makes the chart a bar chart: the named
//   slices stay readable instead of thin wedges beside one big grey one;
// - slices that nest (total times: an operator's total includes its children's) are never
//   a pie, whose parts must add up to the whole: a bar chart ranks them instead.
// Names go through util/bidi (their bidi controls shown) and tooltips escape them. The
// title and the bar chart's "why" line are HTML above the chart (Chart's title/subtitle),
// the bars' value axis has nice ticks (util/ticks).

import type { PieSlice } from "../api/types/pie";
import { showBidiControls } from "../util/bidi";
import { nameHtml, tooltipLine } from "../util/escape";
import { extentOf, valueAxis, type TickUnit } from "../util/ticks";
import { PALETTE, TOOLTIP_BASE, pieTooltip } from "./Chart";

export const OTHER_NAME = "Other";
export const OTHER_MAX = 0.3;

/** s shortened to at most max characters by cutting its middle ("head…tail"). */
export function middleTruncate(s: string, max: number): string {
  const chars = Array.from(s);
  if (chars.length <= max) return s;
  const keep = Math.max(2, max - 1);
  const head = Math.ceil(keep / 2);
  const tail = keep - head;
  return chars.slice(0, head).join("") + "…" + (tail > 0 ? chars.slice(chars.length - tail).join("") : "");
}

/**
 * A short label for every name, each distinct: names are cut in the middle to `max`
 * characters, and names whose cut labels collide are cut less, up to whole; equal names
 * (or a label equal to another whole name) get " (2)", " (3)"... Bidi controls are shown.
 */
export function legendLabels(names: string[], max = 32): Map<string, string> {
  const uniq = Array.from(new Set(names));
  const len = new Map(uniq.map((n) => [n, max]));
  let labels = new Map<string, string>();
  for (let round = 0; round < 64; round++) {
    labels = new Map(uniq.map((n) => [n, middleTruncate(showBidiControls(n), len.get(n)!)]));
    const by = new Map<string, string[]>();
    for (const [n, l] of labels) by.set(l, [...(by.get(l) ?? []), n]);
    let grew = false;
    for (const group of by.values()) {
      if (group.length < 2) continue;
      for (const n of group) {
        const full = Array.from(showBidiControls(n)).length;
        if (len.get(n)! < full) {
          len.set(n, Math.min(full, len.get(n)! + 8));
          grew = true;
        }
      }
    }
    if (!grew) break;
  }
  // still equal (names that differ only in their bidi controls' markers, which cannot be):
  // numbered
  const seen = new Map<string, number>();
  for (const n of uniq) {
    const l = labels.get(n)!;
    const k = (seen.get(l) ?? 0) + 1;
    seen.set(l, k);
    if (k > 1) labels.set(n, `${l} (${k})`);
  }
  return labels;
}

/** The share of the total in the "Other" slice (0 when there is none). */
export function otherShare(slices: PieSlice[]): number {
  const total = slices.reduce((a, s) => a + Math.max(0, s.value_ns), 0);
  if (total <= 0) return 0;
  const other = slices.filter((s) => s.name === OTHER_NAME).reduce((a, s) => a + s.value_ns, 0);
  return other / total;
}

export type PieKind = "pie" | "bar";

/** Pie, or bars when the slices nest or "Other" is more than OTHER_MAX of the whole. */
export function pieKind(slices: PieSlice[], nested = false): PieKind {
  return nested || otherShare(slices) > OTHER_MAX ? "bar" : "pie";
}

export interface PieOptions {
  /** the slices nest (total times): they do not add up to a whole */
  nested?: boolean;
  /** formats a value (ns) */
  fmt: (ns: number) => string;
  /** the values' unit, for the bars' axis (default: durations) */
  unit?: TickUnit;
  /** legend / axis label length */
  labelMax?: number;
}

/** Height in px the canvas of a chart of these slices needs (the title is above it). */
export function pieHeight(kind: PieKind, n: number): number {
  return kind === "pie" ? 236 : Math.max(216, 24 + 18 * n);
}

export interface PieChart {
  kind: PieKind;
  option: Record<string, unknown>;
  title: string;
  /** bars: why they are not a pie */
  subtitle?: string;
}

/** The ECharts option of a "pie" chart, what it was drawn as, and its title and subtitle. */
export function pieChartOption(title: string, slices: PieSlice[], opts: PieOptions): PieChart {
  const kind = pieKind(slices, opts.nested);
  const labels = legendLabels(slices.map((s) => s.name), opts.labelMax ?? 32);
  const label = (n: string) => labels.get(n) ?? n;
  if (kind === "pie") {
    return {
      kind,
      title,
      option: {
        tooltip: { ...TOOLTIP_BASE, trigger: "item", formatter: pieTooltip(opts.fmt) },
        legend: {
          type: "scroll", orient: "vertical", right: 0, top: 4, bottom: 0, width: "42%",
          formatter: label,
          tooltip: { ...TOOLTIP_BASE, show: true, formatter: (p: { name?: string }) => nameHtml(p.name) },
        },
        series: [{
          type: "pie",
          radius: ["32%", "66%"],
          center: ["28%", "50%"],
          label: { show: false },
          data: slices.map((s) => ({ name: s.name, value: s.value_ns })),
        }],
      },
    };
  }
  const total = slices.reduce((a, s) => a + Math.max(0, s.value_ns), 0);
  const why = opts.nested
    ? "Totals include their children's time: ranked, not a pie"
    : `"${OTHER_NAME}" is ${(100 * otherShare(slices)).toFixed(0)}% of the time: ranked, not a pie`;
  return {
    kind,
    title,
    subtitle: why,
    option: {
      tooltip: {
        ...TOOLTIP_BASE,
        trigger: "item",
        formatter: (p: { dataIndex: number; color?: string }) => {
          const s = slices[p.dataIndex];
          if (!s) return "";
          const head = `<div class="tt-title tt-wrap">${nameHtml(s.name)}</div>`;
          return head + (opts.nested || total <= 0
            ? tooltipLine(String(p.color ?? "#888"), "Time", opts.fmt(s.value_ns))
            : tooltipLine(String(p.color ?? "#888"), opts.fmt(s.value_ns), `${((100 * s.value_ns) / total).toFixed(1)}%`));
        },
      },
      grid: { left: 8, right: 24, top: 8, bottom: 8, containLabel: true },
      xAxis: valueAxis(...extentOf(slices.map((s) => s.value_ns)), opts.unit ?? "duration"),
      yAxis: {
        type: "category",
        inverse: true,
        data: slices.map((s) => s.name),
        axisLabel: { formatter: label, fontSize: 11 },
      },
      series: [{
        type: "bar",
        data: slices.map((s, i) => ({
          value: s.value_ns,
          itemStyle: s.name === OTHER_NAME ? { color: "#9e9e9e" } : { color: PALETTE[i % PALETTE.length] },
        })),
        barMaxWidth: 14,
      }],
    },
  };
}
