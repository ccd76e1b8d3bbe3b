// The Kernel view's "Launches" section (launches): per runtime launch call (cudaLaunchKernel,
// cudaGraphLaunch, hipLaunchKernel...) the calls' duration, the launch delay (call start to
// kernel start) and the kernels' duration; their histograms (log-spaced bins); the share
// of kernels shorter than their launch call; the delay outliers; launch overhead per
// operator; launches and kernels that could not be matched.

import { useMemo } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { Histogram, LaunchCallRow, LaunchesReply, LaunchOperatorRow, LaunchOutlier } from "../../api/types/why";
import { Chart, rowTooltip } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes, Stat } from "../../components/common";
import { Caveat } from "../../components/TrustBadge";
import { setState } from "../../state/store";
import { escapeHtml, tooltipLine } from "../../util/escape";
import { fmtCount, fmtDuration, fmtPct } from "../../util/format";
import { extentOf, logTicks, valueAxis } from "../../util/ticks";

export const HISTOGRAMS = [
  { key: "call_dur_ns", title: "Launch call duration", color: "#ee6666", hint: "How long the runtime launch call ran on the host" },
  { key: "launch_delay_ns", title: "Launch delay", color: "#fac858", hint: "From the launch call's start to its kernel's start" },
  { key: "kernel_dur_ns", title: "Kernel duration", color: "#5470c6", hint: "How long the launched kernel ran" },
] as const;

/** "[lo, hi)" bin labels of a histogram (the last bin includes its upper edge). */
export function binLabels(h: Histogram): string[] {
  return h.counts.map((_, i) => `${fmtDuration(h.edges[i])} – ${fmtDuration(h.edges[i + 1])}`);
}

/** Where time v lies on the bins' axis (bin i from i to i + 1, logarithmic inside it), or null outside them. */
export function binPosition(edges: readonly number[], v: number): number | null {
  for (let i = 0; i + 1 < edges.length; i++) {
    const a = edges[i];
    const b = edges[i + 1];
    if (v < a || v > b) continue;
    if (b <= a) return i;
    return i + (a > 0 ? Math.log(v / a) / Math.log(b / a) : (v - a) / (b - a));
  }
  return null;
}

/** Nice times (1, 2, 5 × 10^k, util/ticks) placed on the bins' axis: value axis options. */
export function binTicks(edges: readonly number[]) {
  const n = Math.max(0, edges.length - 1);
  const at = logTicks(edges[0], edges[n], 7)
    .map((v) => ({ v, p: binPosition(edges, v) }))
    .filter((t): t is { v: number; p: number } => t.p !== null);
  const byPos = new Map(at.map((t) => [t.p.toFixed(6), t.v]));
  return {
    type: "value" as const,
    position: "bottom" as const,
    min: 0,
    max: Math.max(1, n),
    axisLine: { show: false },
    splitLine: { show: false },
    axisTick: { customValues: at.map((t) => t.p) },
    axisLabel: {
      customValues: at.map((t) => t.p),
      formatter: (p: number) => {
        const v = byPos.get(Number(p).toFixed(6));
        return v === undefined ? "" : fmtDuration(v);
      },
      hideOverlap: true,
    },
    tbTicks: { values: at.map((t) => t.v), positions: at.map((t) => t.p) },
  };
}

/** A histogram as bars over its (log-spaced) bins; the axis under them marks nice times
 * where they fall (binTicks), each bar's tooltip says its bin. */
export function histogramOption(h: Histogram, title: string, color: string) {
  const labels = binLabels(h);
  return {
    tooltip: rowTooltip(h.counts, (count, _ps, i) =>
      `<div class="tt-title">${escapeHtml(title)}: ${escapeHtml(labels[i])}</div>` + tooltipLine(color, "Launches", fmtCount(count))),
    grid: { left: 56, right: 12, top: 30, bottom: 46 },
    xAxis: {
      type: "category",
      data: labels,
      axisLabel: { show: false },
      axisTick: { show: false },
      name: "log-spaced bins",
      nameLocation: "middle",
      nameGap: 30,
      // drawn as a second x axis by components/Chart
      tbBinTicks: binTicks(h.edges),
    },
    yAxis: valueAxis(...extentOf(h.counts), "count", { extra: { name: "launches" } }),
    series: [{ name: title, type: "bar", barCategoryGap: "8%", itemStyle: { color }, data: [...h.counts] }],
  };
}

export function callCols(): Col<LaunchCallRow>[] {
  return [
    { id: "call", header: "Launch call", value: (r) => r.call, width: 180 },
    { id: "launches", header: "Launches", value: (r) => r.launches, kind: "count" },
    { id: "kernels", header: "Kernels", value: (r) => r.kernels, kind: "count", title: "Kernels run by these launches (a graph launch runs many)" },
    { id: "call_total", header: "Call total", value: (r) => r.call_dur_total_ns, kind: "us" },
    { id: "call_mean", header: "Call mean", value: (r) => r.call_dur_mean_ns, kind: "us" },
    { id: "call_median", header: "Call median", value: (r) => r.call_dur_median_ns, kind: "us" },
    { id: "call_p90", header: "Call p90", value: (r) => r.call_dur_p90_ns, kind: "us" },
    { id: "call_max", header: "Call max", value: (r) => r.call_dur_max_ns, kind: "us" },
    { id: "delay_mean", header: "Delay mean", value: (r) => r.delay_mean_ns, kind: "us", title: "Launch delay: from the call's start to its kernel's start" },
    { id: "delay_median", header: "Delay median", value: (r) => r.delay_median_ns, kind: "us" },
    { id: "delay_p90", header: "Delay p90", value: (r) => r.delay_p90_ns, kind: "us" },
    { id: "delay_max", header: "Delay max", value: (r) => r.delay_max_ns, kind: "us" },
    { id: "kernel_total", header: "Kernel total", value: (r) => r.kernel_dur_total_ns, kind: "us" },
    { id: "kernel_median", header: "Kernel median", value: (r) => r.kernel_dur_median_ns, kind: "us" },
    { id: "short", header: "Short kernels", value: (r) => r.short_kernels, kind: "count", title: "Kernels shorter than their launch call" },
  ];
}

export function outlierCols(): Col<LaunchOutlier>[] {
  return [
    { id: "call", header: "Launch call", value: (r) => r.call, nowrap: true },
    { id: "kernel", header: "Kernel", value: (r) => r.kernel ?? "", width: 240 },
    { id: "operator", header: "Operator", value: (r) => r.operator ?? "" },
    { id: "step", header: "Step", value: (r) => r.step, kind: "count" },
    { id: "start", header: "Call start", value: (r) => r.call_start_ns, kind: "us", title: "From the trace's first event (µs)" },
    { id: "call_dur", header: "Call", value: (r) => r.call_dur_ns, kind: "us" },
    { id: "delay", header: "Launch delay", value: (r) => r.launch_delay_ns, kind: "us" },
    { id: "kernel_dur", header: "Kernel", value: (r) => r.kernel_dur_ns, kind: "us" },
    { id: "reason", header: "Why", value: (r) => r.reason, width: 260 },
  ];
}

export const OUTSIDE_OPS = "(outside any operator)";

export function operatorCols(): Col<LaunchOperatorRow>[] {
  return [
    { id: "operator", header: "Operator", value: (r) => r.operator ?? OUTSIDE_OPS, width: 240 },
    { id: "launches", header: "Launches", value: (r) => r.launches, kind: "count" },
    { id: "call", header: "Launch calls", value: (r) => r.call_ns, kind: "us", title: "Time in the launch calls" },
    { id: "kernel", header: "Kernels", value: (r) => r.kernel_ns, kind: "us", title: "Time the launched kernels ran" },
    { id: "delay", header: "Delay median", value: (r) => r.delay_median_ns, kind: "us" },
    { id: "overhead", header: "Overhead share", value: (r) => (r.overhead_share === null ? null : 100 * r.overhead_share), kind: "pct", title: "Launch calls over launch calls + kernels" },
  ];
}

function Histograms({ d, dark }: { d: LaunchesReply; dark: boolean }) {
  const options = useMemo(
    () => HISTOGRAMS.map((h) => ({ ...h, data: d.histograms[h.key], option: histogramOption(d.histograms[h.key], h.title, h.color) })),
    [d],
  );
  return (
    <div className="grid-1-1 launch-histograms" style={{ gridTemplateColumns: "repeat(auto-fit, minmax(320px, 1fr))" }}>
      {options.map((h) => (
        <div key={h.key} className="launch-histogram" data-key={h.key}>
          <h3 className="sub-head" title={h.hint}>{h.title}</h3>
          {h.data.counts.length ? (
            <Chart option={h.option} dark={dark} height={220} ariaLabel={`${h.title} histogram`} />
          ) : (
            <div className="muted">No launches to count.</div>
          )}
        </div>
      ))}
    </div>
  );
}

export function LaunchesSection({ sel, dark }: Pick<ViewProps, "sel" | "dark">) {
  const state = useApi<LaunchesReply>("launches", sel);
  const cCols = useMemo(() => callCols(), []);
  const oCols = useMemo(() => outlierCols(), []);
  const opCols = useMemo(() => operatorCols(), []);
  const name = (what: string) => [sel.run, sel.worker, "span" + (sel.span ?? ""), what];
  return (
    <Loaded state={state}>
      {(d) => {
        if (!d.launches_total && !d.calls.length) {
          return <Empty title="No kernel launches">{d.notes[0] ?? "This trace has no runtime launch calls matched to kernels."}</Empty>;
        }
        const u = d.unmatched;
        return (
          <div className="why-launches">
            <Notes notes={d.notes} />
            <div className="stats launch-stats" style={{ marginBottom: 10 }} data-launches={d.launches_total} data-short={d.short_kernels} data-short-share={d.short_share ?? ""}>
              <Stat label="Launches" value={<>{fmtCount(d.launches_total)}<Caveat sel={sel} figure="launches" /></>} />
              <Stat
                label="Kernels shorter than their launch call"
                value={`${fmtPct(d.short_share === null ? null : 100 * d.short_share)} (${fmtCount(d.short_kernels)})`}
                hint="Such kernels are launch-bound: the host takes longer to launch them than the device takes to run them (fuse them, or capture a CUDA graph)"
              />
              <Stat label="Delay outliers" value={fmtCount(d.outliers.length)} hint="Launches whose delay is above max(p99, 10 × the median)" />
              <Stat label="Calls without a kernel" value={fmtCount(u.calls_without_kernel)} />
              <Stat label="Kernels without a call" value={fmtCount(u.kernels_without_call)} />
            </div>
            <h3 className="sub-head">Per launch call</h3>
            <div className="launch-calls">
              <DataTable rows={d.calls} cols={cCols} exportName={name("launch-calls")} pageSize={50} initialSort={{ id: "call_total", desc: true }} />
            </div>
            <Histograms d={d} dark={dark} />
            <h3 className="sub-head">Launch delay outliers</h3>
            <div className="launch-outliers">
              {d.outliers.length ? (
                <DataTable
                  rows={d.outliers}
                  cols={oCols}
                  exportName={name("launch-outliers")}
                  pageSize={25}
                  onRowClick={(r) => {
                    const end = Math.max(r.call_start_ns + r.call_dur_ns, (r.kernel_start_ns ?? 0) + (r.kernel_dur_ns ?? 0));
                    setState({ view: "Trace", t0: String(r.call_start_ns), t1: String(end), ev: undefined });
                  }}
                />
              ) : (
                <div className="muted">No launch waits much longer than the others (above max(p99, 10 × the median delay)).</div>
              )}
            </div>
            <h3 className="sub-head">Launch overhead per operator</h3>
            <div className="launch-operators">
              <DataTable rows={d.operators} cols={opCols} exportName={name("launch-operators")} pageSize={25} filterPlaceholder="Filter launching operators…" />
            </div>
          </div>
        );
      }}
    </Loaded>
  );
}
