// The Overview's "Critical path" section (critical_path): per step, the chain of host and
// device work that set the step's length (tb_profiler/analysis/critical_path.py walks it back
// from the step's end), split into the time the device held it (kernels, copies and the
// stream's own gaps), the host held it (host code, runtime calls, launch waits, the host
// tail), synchronizations and other: a stacked bar per step, the mean device share as a
// headline, the longest names on the paths and the notes. "Show in Trace" opens the Trace
// view on a step with its path highlighted (URL key `cp`: the Trace view asks for that
// step's segments and outlines their events, highlightFromSegments below).
//
// The reply's types live here (docs/api.md, GET critical_path).

import { useMemo, useState } from "react";
import type { ViewProps } from "../props";
import { getJson } from "../../api/client";
import { useApi } from "../../api/hooks";
import { Chart, rowTooltip } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Fold, Loaded, Notes, Stat } from "../../components/common";
import { setState } from "../../state/store";
import { escapeHtml, tooltipLine } from "../../util/escape";
import { stackedExtent, valueAxis } from "../../util/ticks";
import { fmtCount, fmtDuration, fmtPct } from "../../util/format";
import { STEP_TIME_TITLE } from "../../util/labels";

export interface CriticalStepRow {
  step: number;
  length_ns: number;
  path_ns: number;
  device_ns: number;
  host_ns: number;
  sync_ns: number;
  other_ns: number;
  device_share: number;
}

export interface CriticalTopRow {
  kind: string;
  name: string;
  ns: number;
  count: number;
}

/** kind: device / device_gap / launch / runtime / host / sync / tail / other */
export interface CriticalSegment {
  step: number;
  kind: string;
  start_ns: number;
  end_ns: number;
  dur_ns: number;
  /** the timeline event's `i`; -1 for a gap */
  row: number;
  name: string | null;
  operator: string | null;
}

export interface CriticalPathReply {
  steps: CriticalStepRow[];
  top: CriticalTopRow[];
  segments: CriticalSegment[];
  segments_total: number;
  step: number | null;
  notes: string[];
}

/** What a segment's kind counts as in the step's summary. */
export type PathPart = "device" | "host" | "sync" | "other";

export function partOf(kind: string): PathPart {
  if (kind === "device" || kind === "device_gap") return "device";
  if (kind === "host" || kind === "launch" || kind === "runtime" || kind === "tail") return "host";
  if (kind === "sync") return "sync";
  return "other";
}

export const PART_COLORS: Record<PathPart | "off", string> = {
  device: "#5470c6",
  host: "#fc8452",
  sync: "#ee6666",
  other: "#aaaaaa",
  off: "#d0d0d0",
};

export const KIND_LABELS: Record<string, string> = {
  device: "Device work",
  device_gap: "Device gap",
  launch: "Launch wait",
  runtime: "Runtime call",
  host: "Host",
  sync: "Synchronization",
  tail: "Host tail",
  other: "Other",
};

const PARTS = [
  { key: "device_ns", name: "Device", color: PART_COLORS.device, hint: "Kernels, copies and fills on the path, and their stream's gaps: the device held the step" },
  { key: "host_ns", name: "Host", color: PART_COLORS.host, hint: "Host code, runtime calls, launch waits and the host tail: the host held the step" },
  { key: "sync_ns", name: "Sync", color: PART_COLORS.sync, hint: "The host waited for the device (synchronizations)" },
  { key: "other_ns", name: "Other", color: PART_COLORS.other, hint: "Before the first dependency the trace shows" },
] as const;

/** The part of a step off the path (the path's segments not covering the whole step). */
export function offPath(r: CriticalStepRow): number {
  return Math.max(0, r.length_ns - (r.device_ns + r.host_ns + r.sync_ns + r.other_ns));
}

/** Stacked bars per step: device, host, sync, other (and off the path, if any): they add up to the step. */
export function pathBarsOption(rows: CriticalStepRow[]) {
  const withOff = rows.some((r) => offPath(r) > 0);
  const parts: { name: string; color: string; value: (r: CriticalStepRow) => number }[] = PARTS.map((p) => ({ name: p.name, color: p.color, value: (r) => r[p.key] }));
  if (withOff) parts.push({ name: "Off the path", color: PART_COLORS.off, value: offPath });
  return {
    tooltip: rowTooltip(rows, (r) => {
      const head = `<div class="tt-title">${escapeHtml(`Step ${r.step}`)}</div>`;
      const lines = parts.map((p) => tooltipLine(p.color, p.name, `${fmtDuration(p.value(r))} (${fmtPct(r.length_ns > 0 ? (100 * p.value(r)) / r.length_ns : null)})`));
      return head + [tooltipLine("#888", "Step", fmtDuration(r.length_ns)), ...lines].join("<br>");
    }),
    legend: { top: 0 },
    grid: { left: 70, right: 20, top: 32, bottom: 40 },
    xAxis: { type: "category", data: rows.map((r) => String(r.step)), name: "Step", nameLocation: "middle", nameGap: 26 },
    yAxis: valueAxis(...stackedExtent(parts.map((p) => rows.map((r) => p.value(r)))), "duration"),
    series: parts.map((p) => ({
      name: p.name,
      type: "bar",
      stack: "path",
      barMaxWidth: 40,
      emphasis: { focus: "series" },
      itemStyle: { color: p.color },
      data: rows.map((r) => p.value(r)),
    })),
  };
}

/** Mean over the steps of the device's and the host's share of the step (0..100); null without steps. */
export function meanShares(rows: CriticalStepRow[]): { device: number; host: number } | null {
  const ok = rows.filter((r) => r.length_ns > 0);
  if (!ok.length) return null;
  const device = ok.reduce((a, r) => a + r.device_share, 0) / ok.length;
  const host = ok.reduce((a, r) => a + r.host_ns / r.length_ns, 0) / ok.length;
  return { device: 100 * device, host: 100 * host };
}

/** "device-bound 37 % of the path, host-bound 63 %" */
export function headline(s: { device: number; host: number }): string {
  return `device-bound ${Math.round(s.device)} % of the path, host-bound ${Math.round(s.host)} %`;
}

/** The time a step's path spans on the timeline: its first segment's start to its last one's end. */
export function stepWindow(segments: readonly CriticalSegment[], step?: number): { start: number; end: number } | null {
  let start = Infinity;
  let end = -Infinity;
  for (const s of segments) {
    if (step !== undefined && s.step !== step) continue;
    if (s.start_ns < start) start = s.start_ns;
    if (s.end_ns > end) end = s.end_ns;
  }
  return Number.isFinite(start) && Number.isFinite(end) && end > start ? { start: Math.floor(start), end: Math.ceil(end) } : null;
}

export interface PathSpan {
  start: number;
  end: number;
  kind: string;
}

/** The timeline's highlight: the events on the path (their `i`) and every segment as a span (gaps included). */
export function highlightFromSegments(segments: readonly CriticalSegment[]): { ids: Set<number>; spans: PathSpan[] } {
  const ids = new Set<number>();
  const spans: PathSpan[] = [];
  for (const s of segments) {
    if (s.row >= 0) ids.add(s.row);
    if (s.end_ns > s.start_ns) spans.push({ start: s.start_ns, end: s.end_ns, kind: s.kind });
  }
  return { ids, spans };
}

export function criticalStepCols(onShow: (step: number) => void): Col<CriticalStepRow>[] {
  return [
    { id: "step", header: "Step", value: (r) => r.step, kind: "count" },
    { id: "length", header: "Step time", value: (r) => r.length_ns, kind: "us", title: STEP_TIME_TITLE },
    { id: "device", header: "Device", value: (r) => r.device_ns, kind: "us", title: PARTS[0].hint },
    { id: "host", header: "Host", value: (r) => r.host_ns, kind: "us", title: PARTS[1].hint },
    { id: "sync", header: "Sync", value: (r) => r.sync_ns, kind: "us", title: PARTS[2].hint },
    { id: "other", header: "Other", value: (r) => r.other_ns, kind: "us", title: PARTS[3].hint },
    { id: "share", header: "Device share", value: (r) => 100 * r.device_share, kind: "pct", title: "Device time on the path over the step" },
    {
      id: "show",
      header: "Trace",
      value: () => "",
      noFilter: true,
      render: (r) => (
        <button
          type="button"
          className="small cp-show"
          data-step={r.step}
          onClick={(e) => {
            e.stopPropagation();
            onShow(r.step);
          }}
        >
          Show in Trace
        </button>
      ),
    },
  ];
}

export const TOP_COLS: Col<CriticalTopRow>[] = [
  { id: "kind", header: "Kind", value: (r) => r.kind, nowrap: true },
  { id: "name", header: "Name", value: (r) => r.name },
  { id: "ns", header: "Time", value: (r) => r.ns, kind: "us", title: "Time on the paths of all steps" },
  { id: "count", header: "Count", value: (r) => r.count, kind: "count", title: "Segments of the paths" },
];

/** Opens the Trace view on a step with its critical path highlighted (the step's window from its segments). */
export async function showInTrace(sel: ViewProps["sel"], step: number): Promise<void> {
  let win: { start: number; end: number } | null = null;
  try {
    const d = await getJson<CriticalPathReply>("critical_path", { ...sel, step });
    win = stepWindow(d.segments, step);
  } catch {
    win = null; // the Trace view still highlights the path; the window stays as it was
  }
  setState({ view: "Trace", cp: String(step), ev: undefined, ...(win ? { t0: String(win.start), t1: String(win.end) } : {}) });
}

export function CriticalPathSection({ sel, dark }: Pick<ViewProps, "sel" | "dark">) {
  const state = useApi<CriticalPathReply>("critical_path", sel);
  const [busy, setBusy] = useState<number | null>(null);
  const steps = useMemo(() => [...(state.data?.steps ?? [])].sort((a, b) => a.step - b.step), [state.data]);
  const option = useMemo(() => pathBarsOption(steps), [steps]);
  const cols = useMemo(() => criticalStepCols((step) => {
    setBusy(step);
    void showInTrace(sel, step).finally(() => setBusy(null));
  }), [sel]);
  const exportBase = [sel.run, sel.worker, "span" + (sel.span ?? "")];
  return (
    <Loaded state={state}>
      {(d) => {
        if (!steps.length) return <Empty title="No critical path">{d.notes[0] ?? "This trace has no steps with launched device work."}</Empty>;
        const shares = meanShares(steps);
        const total = steps.reduce((a, r) => a + r.length_ns, 0);
        const sum = (k: "device_ns" | "host_ns" | "sync_ns") => steps.reduce((a, r) => a + r[k], 0);
        return (
          <div className="why-critical" data-steps={steps.length} data-device-share={shares ? shares.device.toFixed(3) : ""} aria-busy={busy !== null}>
            <Notes notes={d.notes} />
            {shares && (
              <div className="cp-headline" style={{ fontSize: 15, marginBottom: 8 }}>
                On average the critical path is <b>{headline(shares)}</b>.
              </div>
            )}
            <div className="stats" style={{ marginBottom: 10 }}>
              <Stat label="Device on the path" value={`${fmtDuration(sum("device_ns"))} (${fmtPct(total ? (100 * sum("device_ns")) / total : null)})`} hint={PARTS[0].hint} />
              <Stat label="Host on the path" value={`${fmtDuration(sum("host_ns"))} (${fmtPct(total ? (100 * sum("host_ns")) / total : null)})`} hint={PARTS[1].hint} />
              <Stat label="Sync on the path" value={fmtDuration(sum("sync_ns"))} hint={PARTS[2].hint} />
            </div>
            <Chart option={option} dark={dark} height={280} ariaLabel="Critical path per step" />
            <div className="muted small-note">
              Per step, who held the chain of work that set its length: the device (its work and its stream's gaps), the host (its code, runtime calls, launch waits) or a synchronization. A host-bound step gets no shorter from faster kernels.
            </div>
            <h3 className="sub-head">Steps</h3>
            <div className="cp-steps">
              <DataTable rows={steps} cols={cols} exportName={[...exportBase, "critical-path-steps"]} pageSize={50} rowKey={(r) => String(r.step)} filterPlaceholder="Filter steps…" />
            </div>
            <div className="muted small-note">“Show in Trace” opens the step in the Trace view with its critical path outlined.</div>
            <Fold title="Longest on the paths" summary={`${fmtCount(d.top.length)} names`} className="cp-top">
              <DataTable
                rows={d.top}
                cols={TOP_COLS}
                exportName={[...exportBase, "critical-path-top"]}
                pageSize={25}
                initialSort={{ id: "ns", desc: true }}
                caption={`${fmtCount(d.top.length)} names on the paths of all steps (host gaps named by the operator they are charged to)`}
                filterPlaceholder="Filter names…"
              />
            </Fold>
          </div>
        );
      }}
    </Loaded>
  );
}
