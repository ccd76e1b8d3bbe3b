// The Memory view's "Copy bandwidth" section (memcpy): per direction and source/destination
// memory kind the copies, their bytes and time and the bandwidth they reached (all bytes
// over all copy time, and the median/min/max of single copies); the GB/s each direction
// carried over time (every copy's bytes spread over its duration); the largest copies
// (click one to open it in the Trace view); a note on pageable host memory, the slow path.

import { useMemo } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { CopyDirectionRow, CopyOverTime, CopyRow, MemcpyReply } from "../../api/types/why";
import { Chart, TOOLTIP_BASE } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes, Stat } from "../../components/common";
import { setState } from "../../state/store";
import { escapeHtml, tooltipLine } from "../../util/escape";
import { extentOf, valueAxis } from "../../util/ticks";
import { fmtBytes, fmtCount, fmtDuration } from "../../util/format";

export const DIRECTION_COLORS: Record<string, string> = {
  H2D: "#5470c6",
  D2H: "#ee6666",
  D2D: "#91cc75",
  P2P: "#fac858",
  H2H: "#9a60b4",
  other: "#aaaaaa",
};
export const DIRECTION_HINTS: Record<string, string> = {
  H2D: "Host to device",
  D2H: "Device to host",
  D2D: "Device to device (same device)",
  P2P: "Peer to peer (device to another device)",
  H2H: "Host to host",
  other: "Copies whose name does not tell the direction",
};

/** GB/s (bytes per ns), 3 significant digits; "–" when unknown. */
export function fmtGBps(v: number | null | undefined): string {
  return v === null || v === undefined || !Number.isFinite(v) ? "–" : v.toLocaleString("en-US", { maximumSignificantDigits: 3 });
}

/** A copy's bytes, null when unknown (-1). */
export function knownBytes(b: number): number | null {
  return b >= 0 ? b : null;
}

/** "Pageable → Device", or "" when neither kind is known. */
export function memoryKinds(r: Pick<CopyRow, "src" | "dst">): string {
  return r.src || r.dst ? `${r.src ?? "?"} → ${r.dst ?? "?"}` : "";
}

/** The directions that copied from pageable host memory (the slow path), with their copies. */
export function pageableRows(rows: CopyDirectionRow[]): CopyDirectionRow[] {
  return rows.filter((r) => r.src === "Pageable" || r.dst === "Pageable");
}

/** The note on pageable copies, or null without any. */
export function pageableNote(rows: CopyDirectionRow[]): string | null {
  const p = pageableRows(rows);
  if (!p.length) return null;
  const copies = p.reduce((a, r) => a + r.copies, 0);
  const time = p.reduce((a, r) => a + r.time_ns, 0);
  const dirs = [...new Set(p.map((r) => r.direction))].join(", ");
  return (
    `${fmtCount(copies)} ${copies === 1 ? "copy" : "copies"} (${dirs}, ${fmtDuration(time)}) used pageable host memory: the slow path, ` +
    "staged through a pinned buffer by the driver and synchronous with the host. Pin the host tensors " +
    "(DataLoader(pin_memory=True), tensor.pin_memory()) and copy with non_blocking=True."
  );
}

/** The direction series of over_time, in a fixed order (known directions first). */
export function overTimeSeries(o: CopyOverTime): string[] {
  const keys = Object.keys(o).filter((k) => k !== "edges" && Array.isArray(o[k]));
  const order = Object.keys(DIRECTION_COLORS);
  return keys.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b));
}

/** GB/s over time per direction: one line per direction, a point per bin (at its middle). */
export function overTimeOption(o: CopyOverTime) {
  const names = overTimeSeries(o);
  const edges = o.edges ?? [];
  const mids = edges.slice(0, -1).map((e, i) => (e + edges[i + 1]) / 2);
  return {
    tooltip: {
      ...TOOLTIP_BASE,
      trigger: "axis",
      formatter: (params: any) => {
        const ps = Array.isArray(params) ? params : [params];
        const i = ps[0]?.dataIndex ?? -1;
        if (i < 0 || i >= mids.length) return "";
        const head = `<div class="tt-title">${escapeHtml(`${fmtDuration(edges[i])} – ${fmtDuration(edges[i + 1])}`)}</div>`;
        return head + ps.map((p: any) => tooltipLine(String(p.color ?? "#888"), p.seriesName, `${fmtGBps(Array.isArray(p.value) ? p.value[1] : p.value)} GB/s`)).join("<br>");
      },
    },
    legend: { top: 0 },
    grid: { left: 60, right: 24, top: 32, bottom: 44 },
    // the bins' ends are not round: the ticks are the nice times inside them
    xAxis: valueAxis(edges[0] ?? 0, edges[edges.length - 1] ?? 1, "duration", {
      exact: true, count: 6, extra: { name: "time from the trace's first event", nameLocation: "middle", nameGap: 28 },
    }),
    yAxis: valueAxis(...extentOf(names.flatMap((n) => o[n] as number[])), "number", { extra: { name: "GB/s" } }),
    series: names.map((n) => ({
      name: n,
      type: "line",
      step: "middle",
      showSymbol: false,
      areaStyle: { opacity: 0.15 },
      itemStyle: { color: DIRECTION_COLORS[n] ?? "#888" },
      lineStyle: { color: DIRECTION_COLORS[n] ?? "#888" },
      data: mids.map((m, i) => [m, o[n][i] ?? 0]),
    })),
  };
}

export function directionCols(): Col<CopyDirectionRow>[] {
  return [
    { id: "direction", header: "Direction", value: (r) => r.direction, nowrap: true, render: (r) => <span title={DIRECTION_HINTS[r.direction] ?? ""}>{r.direction}</span> },
    { id: "src", header: "Source", value: (r) => r.src ?? "", nowrap: true, title: "Memory kind the copy's name says (Pageable, Pinned, Device)" },
    { id: "dst", header: "Destination", value: (r) => r.dst ?? "", nowrap: true },
    { id: "copies", header: "Copies", value: (r) => r.copies, kind: "count" },
    { id: "bytes", header: "Bytes", value: (r) => r.bytes, kind: "bytes" },
    { id: "time", header: "Time", value: (r) => r.time_ns, kind: "us", title: "Summed duration of the copies" },
    { id: "gbps", header: "GB/s", value: (r) => r.gbps, kind: "num", render: (r) => fmtGBps(r.gbps), title: "All bytes over all copy time" },
    { id: "gbps_median", header: "Median GB/s", value: (r) => r.gbps_median, kind: "num", render: (r) => fmtGBps(r.gbps_median), title: "Of the single copies" },
    { id: "gbps_min", header: "Min GB/s", value: (r) => r.gbps_min, kind: "num", render: (r) => fmtGBps(r.gbps_min) },
    { id: "gbps_max", header: "Max GB/s", value: (r) => r.gbps_max, kind: "num", render: (r) => fmtGBps(r.gbps_max) },
  ];
}

export function copyCols(): Col<CopyRow>[] {
  return [
    { id: "name", header: "Copy", value: (r) => r.name, width: 220 },
    { id: "direction", header: "Direction", value: (r) => r.direction, nowrap: true },
    { id: "kinds", header: "Memory", value: (r) => memoryKinds(r), nowrap: true, title: "Source → destination memory kind" },
    { id: "device", header: "Device", value: (r) => r.device, kind: "count" },
    { id: "stream", header: "Stream", value: (r) => r.stream, kind: "count" },
    { id: "step", header: "Step", value: (r) => r.step, kind: "count" },
    { id: "operator", header: "Operator", value: (r) => r.operator ?? "" },
    { id: "start", header: "Start", value: (r) => r.start_ns, kind: "us", title: "From the trace's first event (µs)" },
    { id: "dur", header: "Duration", value: (r) => r.dur_ns, kind: "us" },
    { id: "bytes", header: "Bytes", value: (r) => knownBytes(r.bytes), kind: "bytes", title: "– : the trace does not say" },
    { id: "gbps", header: "GB/s", value: (r) => r.gbps, kind: "num", render: (r) => fmtGBps(r.gbps) },
  ];
}

export function MemcpySection({ sel, dark }: Pick<ViewProps, "sel" | "dark">) {
  const state = useApi<MemcpyReply>("memcpy", sel);
  const dCols = useMemo(() => directionCols(), []);
  const cCols = useMemo(() => copyCols(), []);
  const option = useMemo(() => (state.data ? overTimeOption(state.data.over_time) : null), [state.data]);
  const name = (what: string) => [sel.run, sel.worker, "span" + (sel.span ?? ""), what];
  return (
    <Loaded state={state}>
      {(d) => {
        if (!d.copies_total && !d.directions.length) {
          return <Empty title="No copies">{d.notes[0] ?? "This trace has no memory copies."}</Empty>;
        }
        const pageable = pageableNote(d.directions);
        const bytes = d.directions.reduce((a, r) => a + Math.max(0, r.bytes), 0);
        const time = d.directions.reduce((a, r) => a + r.time_ns, 0);
        return (
          <div className="why-memcpy" data-copies={d.copies_total}>
            <Notes notes={d.notes} />
            {pageable && <div className="notes-inline pageable-note" role="note">⚠ {pageable}</div>}
            <div className="stats" style={{ marginBottom: 10 }}>
              <Stat label="Copies" value={fmtCount(d.copies_total)} />
              <Stat label="Bytes copied" value={fmtBytes(bytes)} />
              <Stat label="Copy time" value={fmtDuration(time, 4)} />
              <Stat label="Overall GB/s" value={fmtGBps(time > 0 ? bytes / time : null)} hint="All bytes over all copy time" />
            </div>
            <h3 className="sub-head">Per direction</h3>
            <div className="copy-directions">
              <DataTable rows={d.directions} cols={dCols} exportName={name("copy-directions")} pageSize={50} initialSort={{ id: "time", desc: true }} filterPlaceholder="Filter directions…" />
            </div>
            {option && (d.over_time.edges?.length ?? 0) > 1 && (
              <>
                <h3 className="sub-head">GB/s over time</h3>
                <Chart option={option} dark={dark} height={260} ariaLabel="Copy bandwidth over time" />
                <div className="muted small-note">The GB/s each direction carried per time bin, every copy's bytes spread over its duration.</div>
              </>
            )}
            <h3 className="sub-head">Largest copies</h3>
            <div className="copy-largest">
              <DataTable
                rows={d.copies}
                cols={cCols}
                exportName={name("copies")}
                pageSize={25}
                initialSort={{ id: "bytes", desc: true }}
                caption={d.copies_total > d.copies.length ? `The ${fmtCount(d.copies.length)} largest of ${fmtCount(d.copies_total)} copies` : `${fmtCount(d.copies.length)} of ${fmtCount(d.copies_total)} copies`}
                onRowClick={(r) => setState({ view: "Trace", t0: String(r.start_ns), t1: String(r.start_ns + r.dur_ns), ev: undefined })}
                filterPlaceholder="Filter copies…"
              />
            </div>
            <div className="muted small-note">Click a copy to open it in the Trace view.</div>
          </div>
        );
      }}
    </Loaded>
  );
}
