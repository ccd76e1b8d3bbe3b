// The Overview's "Device idle time" section (idle): per device, idle against busy time
// inside the steps and the idle time split into host wait (nothing launched yet), kernel
// wait (launched, started within the threshold) and other (launched, waited longer): a
// stacked bar per step and the totals; per stream; the longest gaps (click one to open it
// in the Trace view). The kernel-wait threshold is a control (10 / 30 / 100 µs).

import { useMemo, useState } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { IdleGap, IdleReply, IdleRow } from "../../api/types/why";
import { Chart, rowTooltip } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Fold, Loaded, Notes, Select, Stat } from "../../components/common";
import { setState } from "../../state/store";
import { escapeHtml, tooltipLine } from "../../util/escape";
import { stackedExtent, valueAxis } from "../../util/ticks";
import { fmtCount, fmtDuration, fmtPct } from "../../util/format";

export const THRESHOLDS = [
  { value: "10000", label: "10 µs" },
  { value: "30000", label: "30 µs" },
  { value: "100000", label: "100 µs" },
];
export const DEFAULT_THRESHOLD_NS = 30000;

export const KIND_LABELS: Record<string, string> = {
  host_wait: "Host wait",
  kernel_wait: "Kernel wait",
  other: "Other",
};
export const KIND_HINTS: Record<string, string> = {
  host_wait: "Nothing was launched yet: the device waited for the host",
  kernel_wait: "The next work was launched and started within the threshold (launch latency)",
  other: "The next work was launched but started later than the threshold (a sync, an event, a copy, another stream)",
};
const PARTS = [
  { key: "busy_ns", name: "Busy", color: "#91cc75" },
  { key: "host_wait_ns", name: KIND_LABELS.host_wait, color: "#ee6666" },
  { key: "kernel_wait_ns", name: KIND_LABELS.kernel_wait, color: "#fac858" },
  { key: "other_ns", name: KIND_LABELS.other, color: "#aaaaaa" },
] as const;

/** Share of the window, 0..100, or null without a window. */
export function share(part: number, window: number): number | null {
  return window > 0 ? (100 * part) / window : null;
}

/** The device-level rows over all steps (step -1), by device. */
export function deviceTotals(d: IdleReply): IdleRow[] {
  return d.devices.filter((r) => r.step === -1).sort((a, b) => a.device - b.device);
}

/** One device's rows per step (step -1 left out), by step. */
export function deviceSteps(d: IdleReply, device: number): IdleRow[] {
  return d.devices.filter((r) => r.device === device && r.step !== -1).sort((a, b) => a.step - b.step);
}

/** Stacked bars per step of one device: busy, host wait, kernel wait, other (they add up to the step). */
export function idleBarsOption(rows: IdleRow[], deviceWord: string) {
  return {
    tooltip: rowTooltip(rows, (r) => {
      const head = `<div class="tt-title">${escapeHtml(`${deviceWord} ${r.device}, step ${r.step}`)}</div>`;
      const lines = PARTS.map((p) => tooltipLine(p.color, p.name, `${fmtDuration(r[p.key])} (${fmtPct(share(r[p.key], r.window_ns))})`));
      return head + [tooltipLine("#888", "Step window", fmtDuration(r.window_ns)), ...lines].join("<br>");
    }),
    legend: { top: 0 },
    grid: { left: 70, right: 20, top: 32, bottom: 40 },
    xAxis: { type: "category", data: rows.map((r) => String(r.step)), name: "Step", nameLocation: "middle", nameGap: 26 },
    yAxis: valueAxis(...stackedExtent(PARTS.map((p) => rows.map((r) => r[p.key]))), "duration"),
    series: PARTS.map((p) => ({
      name: p.name,
      type: "bar",
      stack: "window",
      barMaxWidth: 40,
      emphasis: { focus: "series" },
      itemStyle: { color: p.color },
      data: rows.map((r) => r[p.key]),
    })),
  };
}

export function idleCols(deviceWord: string, withStream: boolean): Col<IdleRow>[] {
  const c: Col<IdleRow>[] = [{ id: "device", header: deviceWord, value: (r) => r.device, kind: "count" }];
  if (withStream) c.push({ id: "stream", header: "Stream", value: (r) => r.stream, kind: "count" });
  c.push(
    { id: "window", header: "Steps' window", value: (r) => r.window_ns, kind: "us", title: "The steps' duration" },
    { id: "busy", header: "Busy", value: (r) => r.busy_ns, kind: "us", title: "Time with device work running: kernels, copies or fills (the device summary's Kernel busy counts kernels only)" },
    { id: "idle", header: "Idle", value: (r) => r.idle_ns, kind: "us" },
    { id: "idle_pct", header: "Idle share", value: (r) => share(r.idle_ns, r.window_ns), kind: "pct", title: "Idle over the steps' window" },
    { id: "host", header: "Host wait", value: (r) => r.host_wait_ns, kind: "us", title: KIND_HINTS.host_wait },
    { id: "kernel", header: "Kernel wait", value: (r) => r.kernel_wait_ns, kind: "us", title: KIND_HINTS.kernel_wait },
    { id: "other", header: "Other", value: (r) => r.other_ns, kind: "us", title: KIND_HINTS.other },
    { id: "gaps", header: "Gaps", value: (r) => r.gaps, kind: "count", title: "Idle stretches" },
  );
  return c;
}

export function gapCols(deviceWord: string): Col<IdleGap>[] {
  return [
    { id: "kind", header: "Kind", value: (r) => KIND_LABELS[r.kind] ?? r.kind, nowrap: true },
    { id: "device", header: deviceWord, value: (r) => r.device, kind: "count" },
    { id: "stream", header: "Stream", value: (r) => (r.stream === -1 ? "all" : r.stream), nowrap: true, title: "all: every stream of the device idle together" },
    { id: "step", header: "Step", value: (r) => r.step, kind: "count" },
    { id: "start", header: "Start", value: (r) => r.start_ns, kind: "us", title: "From the trace's first event (µs)" },
    { id: "dur", header: "Duration", value: (r) => r.dur_ns, kind: "us" },
  ];
}

function DeviceTotals({ r, deviceWord }: { r: IdleRow; deviceWord: string }) {
  return (
    <div className="stats idle-totals" data-device={r.device} data-idle={r.idle_ns} data-busy={r.busy_ns} data-host-wait={r.host_wait_ns} data-kernel-wait={r.kernel_wait_ns} data-other={r.other_ns} data-window={r.window_ns}>
      <Stat label={`${deviceWord} ${r.device} idle (${fmtPct(share(r.idle_ns, r.window_ns))} of the steps)`} value={fmtDuration(r.idle_ns, 4)} />
      <Stat label="Busy" value={fmtDuration(r.busy_ns, 4)} />
      <Stat label="Host wait" value={fmtDuration(r.host_wait_ns, 4)} hint={KIND_HINTS.host_wait} />
      <Stat label="Kernel wait" value={fmtDuration(r.kernel_wait_ns, 4)} hint={KIND_HINTS.kernel_wait} />
      <Stat label="Other" value={fmtDuration(r.other_ns, 4)} hint={KIND_HINTS.other} />
    </div>
  );
}

export function IdleTimeSection({ sel, dark, deviceWord }: Pick<ViewProps, "sel" | "dark"> & { deviceWord: string }) {
  const [threshold, setThreshold] = useState(DEFAULT_THRESHOLD_NS);
  const [device, setDevice] = useState<number | null>(null);
  const state = useApi<IdleReply>("idle", { ...sel, kernel_wait_ns: threshold }, { keepStale: true });
  const totals = useMemo(() => (state.data ? deviceTotals(state.data) : []), [state.data]);
  const dev = totals.find((r) => r.device === device) ?? totals[0];
  const perStep = useMemo(() => (state.data && dev ? deviceSteps(state.data, dev.device) : []), [state.data, dev]);
  const option = useMemo(() => idleBarsOption(perStep, deviceWord), [perStep, deviceWord]);
  const devCols = useMemo(() => idleCols(deviceWord, false), [deviceWord]);
  const streamCols = useMemo(() => idleCols(deviceWord, true), [deviceWord]);
  const gCols = useMemo(() => gapCols(deviceWord), [deviceWord]);
  return (
    <div className="why-idle" data-threshold-ns={threshold}>
      {(!state.data || totals.length > 0) && (
      <div className="controls" style={{ marginBottom: 10 }}>
        <Select
          label="Kernel wait below"
          title="An idle stretch whose next work was already launched counts as kernel wait below this, as other from it on"
          value={String(threshold)}
          options={THRESHOLDS}
          onChange={(v) => setThreshold(Number(v))}
        />
        {totals.length > 1 && (
          <Select
            label={deviceWord}
            value={String(dev?.device ?? "")}
            options={totals.map((r) => ({ value: String(r.device), label: `${deviceWord} ${r.device}` }))}
            onChange={(v) => setDevice(Number(v))}
          />
        )}
      </div>
      )}
      <Loaded state={state}>
        {(d) => {
          if (!totals.length || !dev) {
            return <Empty title={`No ${deviceWord.toLowerCase()} work`}>{d.notes[0] ?? "This trace has no device work inside its steps: there is no idle time to split."}</Empty>;
          }
          const streams = d.streams.filter((r) => r.step === -1);
          return (
            <>
              <Notes notes={d.notes} />
              <DeviceTotals r={dev} deviceWord={deviceWord} />
              <Chart option={option} dark={dark} height={280} ariaLabel="Device idle time per step" />
              <div className="muted small-note">
                Per step of {deviceWord} {dev.device}: busy time and idle time split by why it was idle. Host wait: {KIND_HINTS.host_wait.toLowerCase()}; kernel wait: launched and started within {fmtDuration(d.threshold_ns)}; other: launched, started later.
              </div>
              <h3 className="sub-head">Per {deviceWord}, over all steps</h3>
              <DataTable rows={totals} cols={devCols} exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "idle-devices"]} pageSize={50} filterPlaceholder="Filter…" />
              <Fold title="Per stream, over all steps" summary={`${fmtCount(streams.length)} streams`} className="idle-streams">
                <DataTable rows={streams} cols={streamCols} exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "idle-streams"]} pageSize={50} initialSort={{ id: "idle", desc: true }} filterPlaceholder="Filter…" />
              </Fold>
              <Fold title="Longest gaps" summary={d.gaps_total > d.gaps.length ? `the ${fmtCount(d.gaps.length)} longest of ${fmtCount(d.gaps_total)}` : `${fmtCount(d.gaps_total)} gaps`} className="idle-gaps">
                <DataTable
                  rows={d.gaps}
                  cols={gCols}
                  exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "idle-gaps"]}
                  pageSize={25}
                  initialSort={{ id: "dur", desc: true }}
                  caption={d.gaps_total > d.gaps.length ? `The ${fmtCount(d.gaps.length)} longest of ${fmtCount(d.gaps_total)} gaps` : `${fmtCount(d.gaps_total)} gaps`}
                  onRowClick={(g) => setState({ view: "Trace", t0: String(g.start_ns), t1: String(g.end_ns), ev: undefined })}
                  filterPlaceholder="Filter gaps…"
                />
                <div className="muted small-note">Click a gap to open it in the Trace view.</div>
              </Fold>
            </>
          );
        }}
      </Loaded>
    </div>
  );
}
