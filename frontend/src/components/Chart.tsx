// Apache ECharts, tree-shaken to the charts and components the views use, canvas
// renderer. Tooltips are HTML: every formatter escapes (util/escape), and the default
// formatter is never used for untrusted names (see tooltip helpers below). The option
// last drawn is kept on the chart's element as `tbOption` (for tests and tools: what a
// chart shows can be read without scraping the canvas). A chart's title and subtitle are
// HTML above the canvas (never ECharts' title, whose subtitle could overlap it), and its
// value axes take their ticks from util/ticks (valueAxis).

import { useEffect, useRef } from "react";
import * as echarts from "echarts/core";
import { BarChart, CustomChart, HeatmapChart, LineChart, PieChart, ScatterChart } from "echarts/charts";
import {
  BrushComponent, DataZoomComponent, GridComponent, LegendComponent, MarkLineComponent, MarkPointComponent,
  TitleComponent, TooltipComponent, VisualMapComponent,
} from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";
import type { EChartsCoreOption } from "echarts/core";
import { nameHtml, tooltipLine } from "../util/escape";

echarts.use([
  BarChart, CustomChart, HeatmapChart, LineChart, PieChart, ScatterChart, BrushComponent, GridComponent, LegendComponent, TooltipComponent, TitleComponent,
  DataZoomComponent, MarkLineComponent, MarkPointComponent, VisualMapComponent, CanvasRenderer,
]);

export const PALETTE = [
  "#5470c6", "#91cc75", "#fac858", "#ee6666", "#73c0de", "#3ba272", "#fc8452", "#9a60b4",
  "#ea7ccc", "#2f4554", "#c23531", "#61a0a8",
];

export type ChartEvents = Record<string, (params: any) => void>;

interface Props {
  option: EChartsCoreOption;
  dark: boolean;
  height?: number | string;
  events?: ChartEvents;
  className?: string;
  ariaLabel?: string;
  /**
   * Called with the instance after every setOption: for actions an option cannot
   * express (e.g. arming the brush so a drag on the plot selects a range).
   */
  afterSetOption?: (chart: echarts.ECharts) => void;
  /** a title above the chart (HTML: it wraps, and nothing drawn can overlap it) */
  title?: string;
  /** a line under the title */
  subtitle?: string;
}

export function Chart({ option, dark, height = 300, events, className, ariaLabel, afterSetOption, title, subtitle }: Props) {
  const el = useRef<HTMLDivElement>(null);
  const chart = useRef<echarts.ECharts | null>(null);
  const eventsRef = useRef<ChartEvents | undefined>(events);
  eventsRef.current = events;
  const afterRef = useRef(afterSetOption);
  afterRef.current = afterSetOption;

  // (re)create on theme change
  useEffect(() => {
    if (!el.current) return;
    const c = echarts.init(el.current, dark ? "dark" : undefined, { renderer: "canvas" });
    chart.current = c;
    const names = new Set<string>(Object.keys(eventsRef.current ?? {}));
    for (const n of names) c.on(n, (p: unknown) => eventsRef.current?.[n]?.(p));
    const ro = new ResizeObserver(() => c.resize());
    ro.observe(el.current);
    return () => {
      ro.disconnect();
      c.dispose();
      chart.current = null;
    };
  }, [dark]);

  useEffect(() => {
    const c = chart.current;
    if (!c) return;
    c.setOption(
      {
        backgroundColor: "transparent",
        color: PALETTE,
        textStyle: { fontFamily: "inherit" },
        ...withBinTicks(option),
      },
      { notMerge: true },
    );
    if (el.current) (el.current as HTMLDivElement & { tbOption?: unknown }).tbOption = option;
    afterRef.current?.(c);
  }, [option, dark]);

  // always the same elements: the chart stays bound to its element when a title comes or goes
  return (
    <figure className="chart-figure">
      {(title || subtitle) && (
        <figcaption className="chart-head">
          {title && <div className="chart-title">{title}</div>}
          {subtitle && <div className="chart-subtitle">{subtitle}</div>}
        </figcaption>
      )}
      <div ref={el} className={className ?? "chart"} style={{ height }} role="img" aria-label={ariaLabel} />
    </figure>
  );
}

/** A category x axis of bins may carry `tbBinTicks`, a value axis over the bins' positions
 * (bin i from i to i + 1) whose ticks mark nice values (views/why/Launches): drawn as a
 * second x axis under it. */
function withBinTicks(option: EChartsCoreOption): EChartsCoreOption {
  const x = option.xAxis as Record<string, unknown> | undefined;
  if (!x || Array.isArray(x) || !x.tbBinTicks) return option;
  return { ...option, xAxis: [x, x.tbBinTicks] };
}

/** Tooltip for axis-triggered charts: the axis value, then one escaped line per series. */
export function axisTooltip(fmt: (v: number) => string, title?: (axisValue: string) => string) {
  return (params: any) => {
    const ps = Array.isArray(params) ? params : [params];
    if (!ps.length) return "";
    const head = title ? title(String(ps[0].axisValueLabel ?? ps[0].name ?? "")) : String(ps[0].axisValueLabel ?? ps[0].name ?? "");
    const lines = ps
      .filter((p: any) => p.value !== null && p.value !== undefined && p.value !== "-")
      .map((p: any) => {
        const v = Array.isArray(p.value) ? p.value[p.encode?.y?.[0] ?? 1] : p.value;
        return tooltipLine(String(p.color ?? "#888"), p.seriesName, fmt(Number(v)));
      });
    return `<div class="tt-title">${nameHtml(head)}</div>${lines.join("<br>")}`;
  };
}

/** Tooltip for pie charts: escaped name, formatted value and share. */
export function pieTooltip(fmt: (v: number) => string) {
  return (p: any) =>
    `<div class="tt-title tt-wrap">${nameHtml(p.name)}</div>` +
    tooltipLine(String(p.color ?? "#888"), fmt(Number(p.value)), `${Number(p.percent ?? 0).toFixed(1)}%`);
}

/** Shortens a long (kernel) name for a legend or axis label; the tooltip shows it whole. */
export function shortName(s: string, max = 40): string {
  if (s.length <= max) return s;
  return s.slice(0, max - 1) + "…";
}

/** Common tooltip settings: confined to the chart, HTML, width-limited. */
export const TOOLTIP_BASE = {
  confine: true,
  renderMode: "html" as const,
  extraCssText: "max-width:520px;white-space:normal;word-break:break-all;",
};

/** An axis tooltip over bars drawn one per row: ``format`` gets the hovered row (by the
 * first series' data index), the series' params and the index; nothing outside the rows. */
export function rowTooltip<T>(rows: readonly T[], format: (row: T, params: any[], index: number) => string) {
  return {
    ...TOOLTIP_BASE,
    trigger: "axis" as const,
    axisPointer: { type: "shadow" as const },
    formatter: (params: any) => {
      const ps = Array.isArray(params) ? params : [params];
      const i = ps[0]?.dataIndex ?? -1;
      return i >= 0 && i < rows.length ? format(rows[i], ps, i) : "";
    },
  };
}

