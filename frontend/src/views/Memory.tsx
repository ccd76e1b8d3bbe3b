// Memory: allocated / reserved over time per device; selecting a range on the curve
// (a drag across the plot, the slider under it, or Ctrl+wheel) filters the
// per-operator statistics and the allocation events below it. The range lives in
// the URL (m0 / m1, ns from the trace's origin) and goes to the API as is.

import { useEffect, useMemo, useRef } from "react";
import type { ViewProps } from "./props";
import { useApi, type ApiState } from "../api/hooks";
import type { MemoryCurveReply, MemoryEventRow, MemoryEventsReply, MemoryReply, MemoryStatRow } from "../api/types/memory";
import type { ECharts } from "echarts/core";
import { Chart, TOOLTIP_BASE } from "../components/Chart";
import { DataTable, type Col } from "../components/DataTable";
import { Name } from "../components/Name";
import { Empty, Loaded, Notes, Section, Select, Stat } from "../components/common";
import { setState } from "../state/store";
import { escapeHtml, tooltipLine } from "../util/escape";
import { fmtBytes, fmtDuration, fmtPct } from "../util/format";
import { extentOf, niceAxis, valueAxis } from "../util/ticks";
import { MemcpySection } from "./why/Memcpy";
import { SnapshotSection } from "./memory/Snapshot";
import { useSnapshotOverlay, type OverlaySeries } from "./memory/overlay";

function parseNs(s: string | undefined): number | null {
  return s && /^\d+$/.test(s) ? Number(s) : null;
}

const statCols: Col<MemoryStatRow>[] = [
  { id: "name", header: "Operator", value: (r) => r.name, width: 220, title: "An allocation factory (aten::empty, aten::empty_strided, aten::zeros, aten::resize_, …) is filed under the operator that called it: \"aten::mm (aten::empty)\"" },
  { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
  { id: "inc", header: "Size increase", value: (r) => r.size_increase, kind: "bytes", title: "Allocated minus freed, the operator and its children" },
  { id: "sinc", header: "Self size increase", value: (r) => r.self_size_increase, kind: "bytes" },
  { id: "acount", header: "Allocations", value: (r) => r.allocation_count, kind: "count" },
  { id: "sacount", header: "Self allocations", value: (r) => r.self_allocation_count, kind: "count" },
  { id: "asize", header: "Allocation size", value: (r) => r.allocation_size, kind: "bytes" },
  { id: "sasize", header: "Self allocation size", value: (r) => r.self_allocation_size, kind: "bytes" },
  { id: "fcount", header: "Frees", value: (r) => r.free_count, kind: "count" },
  { id: "fsize", header: "Free size", value: (r) => r.free_size, kind: "bytes" },
];

const eventCols: Col<MemoryEventRow>[] = [
  { id: "op", header: "Operator", value: (r) => r.op ?? "", width: 180 },
  { id: "parent", header: "Parent operator", value: (r) => r.parent_op ?? "" },
  { id: "bytes", header: "Size", value: (r) => r.bytes, kind: "bytes" },
  { id: "alloc", header: "Allocated at", value: (r) => r.alloc_ns, kind: "us", title: "From the trace's first event (µs); empty: allocated before the trace" },
  { id: "free", header: "Freed at", value: (r) => r.free_ns, kind: "us", title: "Empty: still allocated at the end of the trace" },
  { id: "dur", header: "Lifetime", value: (r) => r.duration_ns, kind: "us" },
  { id: "freeop", header: "Freed by", value: (r) => r.free_op ?? "" },
  { id: "addr", header: "Address", value: (r) => String(r.addr), noFilter: true },
];

/** The range [a, z] (integer ns, widened outwards) or null for the whole extent. */
function toRange(a: number, z: number, extent: [number, number]): { m0: string | undefined; m1: string | undefined } {
  const lo = Math.max(extent[0], Math.floor(Math.min(a, z)));
  const hi = Math.min(extent[1], Math.ceil(Math.max(a, z)));
  if (hi <= lo || (lo <= extent[0] && hi >= extent[1])) return { m0: undefined, m1: undefined };
  return { m0: String(lo), m1: String(hi) };
}

/** Arms the brush: a drag across the plot draws a time range (ECharts needs an action for it). */
function armBrush(chart: ECharts) {
  chart.dispatchAction({ type: "takeGlobalCursor", key: "brush", brushOption: { brushType: "lineX", brushMode: "single" } });
}

/** The time axis over the whole curve [extent] with nice ticks for the part shown
 * ([lo, hi]: the range zoomed to); the datazoom handler swaps the ticks as the window moves. */
export function timeAxisTicks(lo: number, hi: number) {
  const a = niceAxis(lo, hi, "duration", { exact: true, count: 6 });
  return { axisTick: { customValues: a.ticks }, axisLabel: { hideOverlap: true, customValues: a.ticks, formatter: a.format }, tbTicks: { step: a.step, unit: a.unit.suffix, ticks: a.ticks } };
}

/** Exact bytes for a hover hint: the figure shown is rounded to 3 digits. */
function exactBytes(b: number | null | undefined): string | undefined {
  return b === null || b === undefined ? undefined : `${Math.round(b).toLocaleString("en-US")} bytes`;
}

function Curve({ d, device, dark, range, extra }: { d: MemoryCurveReply; device: string; dark: boolean; range: [number, number] | null; extra?: OverlaySeries | null }) {
  const pts = d.curves[device] ?? [];
  const peak = d.peaks.find((p) => p.device === device);
  const extent: [number, number] = pts.length ? [pts[0].ts_ns, pts[pts.length - 1].ts_ns] : [0, 1];
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const chart = useRef<ECharts | null>(null);
  // a pending slider write must not land after the curve is gone (device or run changed)
  useEffect(() => () => { if (timer.current) clearTimeout(timer.current); }, []);
  const option = useMemo(() => {
    const hasReserved = pts.some((p) => p.reserved !== null);
    const span = Math.max(1, extent[1] - extent[0]);
    const pct = (v: number) => (100 * (v - extent[0])) / span;
    return {
      // drawn at once: a measurement read off the curve (hover, a range just selected)
      // must never catch the line halfway through an entry animation
      animation: false,
      tooltip: {
        ...TOOLTIP_BASE,
        trigger: "axis",
        formatter: (ps: any[]) => {
          const t = Number(ps[0]?.value?.[0] ?? 0);
          return `<div class="tt-title">${escapeHtml(fmtDuration(t))}</div>` +
            ps.map((p) => tooltipLine(String(p.color), p.seriesName, fmtBytes(Number(p.value?.[1])))).join("<br>");
        },
      },
      legend: { top: 0 },
      grid: { left: 80, right: 30, top: 36, bottom: 70 },
      // the axis ends (trace start / end) are not round: the ticks are the nice times inside
      xAxis: { type: "value", min: extent[0], max: extent[1], ...timeAxisTicks(...(range ?? extent)) },
      yAxis: valueAxis(...extentOf([...pts.flatMap((p) => [p.allocated, p.reserved]), ...(extra?.data.map((p) => p[1]) ?? [])]), "bytes"),
      // a drag across the plot selects a range (the brush is cleared again: the chart zooms to it)
      brush: { xAxisIndex: 0, brushType: "lineX", brushMode: "single", transformable: false, outOfBrush: { colorAlpha: 1 }, brushStyle: { color: "rgba(84,112,198,0.15)", borderColor: "rgba(84,112,198,0.6)", borderWidth: 1 } },
      dataZoom: [
        { type: "slider", xAxisIndex: 0, filterMode: "none", bottom: 12, start: range ? pct(range[0]) : 0, end: range ? pct(range[1]) : 100, labelFormatter: (v: number) => fmtDuration(v) },
        { type: "inside", xAxisIndex: 0, filterMode: "none", zoomOnMouseWheel: "ctrl", moveOnMouseWheel: false, moveOnMouseMove: false },
      ],
      series: [
        {
          name: "Allocated",
          type: "line",
          step: "end",
          showSymbol: false,
          // no client-side sampling: the server already thinned the curve keeping every
          // peak, and LTTB (not peak-preserving) dropped them (the peak mark floated over nothing)
          areaStyle: { opacity: 0.15 },
          data: pts.map((p) => [p.ts_ns, p.allocated]),
          markPoint: peak?.peak_allocated_ns != null && peak.peak_allocated != null
            ? { symbolSize: 36, label: { formatter: "peak" }, data: [{ coord: [peak.peak_allocated_ns, peak.peak_allocated], value: "peak" }] }
            : undefined,
        },
        ...(hasReserved ? [{ name: "Reserved", type: "line", step: "end", showSymbol: false, data: pts.map((p) => [p.ts_ns, p.reserved]) }] : []),
        // the run's memory snapshot over the same time (memory/overlay)
        ...(extra ? [{ name: extra.name, type: "line", step: "end", showSymbol: false, lineStyle: { type: "dotted" }, data: extra.data }] : []),
      ],
    };
  }, [d, device, range?.[0], range?.[1], extra]); // eslint-disable-line react-hooks/exhaustive-deps

  const events = useMemo(() => ({
    datazoom: (p: any) => {
      const b = p.batch?.[0] ?? p;
      const s = typeof b.start === "number" ? b.start : 0;
      const e = typeof b.end === "number" ? b.end : 100;
      const span = extent[1] - extent[0];
      const whole = s <= 0.01 && e >= 99.99; // a handle dragged back to an end
      // the ticks follow the window at once (the URL, and with it the option, once the drag rests)
      const lo = extent[0] + (s / 100) * span;
      const hi = extent[0] + (e / 100) * span;
      if (hi > lo) requestAnimationFrame(() => chart.current?.setOption({ xAxis: timeAxisTicks(lo, hi) }));
      const next = whole ? { m0: undefined, m1: undefined } : toRange(extent[0] + (s / 100) * span, extent[0] + (e / 100) * span, extent);
      // the slider fires on every mouse move: write the URL once the drag rests
      if (timer.current) clearTimeout(timer.current);
      timer.current = setTimeout(() => setState(next, true), 250);
    },
    brushEnd: (p: any) => {
      const r = p.areas?.[0]?.coordRange as [number, number] | undefined;
      if (!r || r.length !== 2) return;
      if (timer.current) clearTimeout(timer.current);
      chart.current?.dispatchAction({ type: "brush", areas: [] }); // the zoomed chart shows the range
      const next = toRange(r[0], r[1], extent);
      if (next.m0 !== undefined) setState(next); // a new history entry: Back returns to the previous range
    },
  }), [extent[0], extent[1]]); // eslint-disable-line react-hooks/exhaustive-deps

  if (!pts.length) return <Empty title={`No memory records for ${device}`} />;
  return <Chart option={option} dark={dark} height={340} events={events} afterSetOption={(c) => { chart.current = c; armBrush(c); }} ariaLabel={`Memory over time, ${device}`} />;
}

/** Says that the rows shown are the previous range's while the new range's are fetched. */
function Updating({ state }: { state: ApiState<unknown> }) {
  return state.loading && state.data ? <span className="muted" role="status">Updating…</span> : null;
}

export function MemoryView({ st, sel, dark }: ViewProps) {
  const curve = useApi<MemoryCurveReply>("memory_curve", sel);
  const m0 = parseNs(st.m0);
  const m1 = parseNs(st.m1);
  const range: [number, number] | null = m0 !== null && m1 !== null && m1 > m0 ? [m0, m1] : null;
  const device = st.dev && curve.data?.devices.includes(st.dev) ? st.dev : curve.data?.default_device ?? curve.data?.devices[0] ?? undefined;
  const rangeParams = { start_ns: range?.[0], end_ns: range?.[1] };
  const stats = useApi<MemoryReply>(curve.data && device ? "memory" : null, { ...sel, device, ...rangeParams }, { keepStale: true });
  const events = useApi<MemoryEventsReply>(curve.data && device ? "memory_events" : null, { ...sel, device, ...rangeParams }, { keepStale: true });
  const overlay = useSnapshotOverlay(sel, curve.data, device);

  return (
    <Loaded state={curve}>
      {(c) => {
        if (!c.devices.length) {
          return (
            <>
            <Empty title="No memory records">
              {c.notes?.[0] ?? "This trace has no [memory] events. Profile with profile_memory=True to see memory."}
            </Empty>
            <SnapshotSection sel={sel} dark={dark} />
            </>
          );
        }
        const peak = c.peaks.find((p) => p.device === device);
        return (
          <div className="view">
            <Notes notes={c.notes} />
            <div className="controls">
              <Select label="Device" value={device ?? ""} options={c.devices} onChange={(v) => setState({ dev: v, m0: undefined, m1: undefined })} />
              {range ? (
                <>
                  <span className="muted">
                    Range {fmtDuration(range[0])} – {fmtDuration(range[1])} ({fmtDuration(range[1] - range[0])})
                  </span>
                  <button type="button" className="small" onClick={() => setState({ m0: undefined, m1: undefined }, true)}>
                    Reset range
                  </button>
                </>
              ) : (
                <span className="muted">Drag across the curve (or the slider under it) to select a time range: the tables follow it.</span>
              )}
            </div>
            {peak && (
              <div className="stats">
                <Stat label="Peak allocated" value={fmtBytes(peak.peak_allocated)} hint={[exactBytes(peak.peak_allocated), peak.reconstructed ? "reconstructed from the allocations and frees in the trace" : undefined].filter(Boolean).join("; ") || undefined} />
                {peak.peak_allocated_ns != null && <Stat label="Peak at" value={fmtDuration(peak.peak_allocated_ns)} hint={`${peak.peak_allocated_ns.toLocaleString("en-US")} ns from the trace's first event`} />}
                <Stat label="Peak reserved" value={fmtBytes(peak.peak_reserved)} hint={exactBytes(peak.peak_reserved)} />
                <Stat label="Device memory" value={fmtBytes(peak.total_memory)} hint={exactBytes(peak.total_memory)} />
                {peak.total_memory && peak.peak_allocated != null ? <Stat label="Peak / device memory" value={fmtPct((100 * peak.peak_allocated) / peak.total_memory)} /> : null}
              </div>
            )}
            <Section title={<>Memory over time — <Name text={device} /></>}>
              {device && <Curve d={c} device={device} dark={dark} range={range} extra={overlay} />}
            </Section>
            <SnapshotSection sel={sel} dark={dark} />
            <Section title="Memory by operator" actions={<Updating state={stats} />}>
              <Loaded state={stats}>
                {(s) => (
                  <>
                    <Notes notes={(s.notes ?? []).filter((n) => !(c.notes ?? []).includes(n))} />
                    <DataTable rows={s.rows} cols={statCols} exportName={[sel.run, "memory-stats", device]} initialSort={{ id: "sasize", desc: true }} filterPlaceholder="Filter operators…" emptyText="No allocations in this range." />
                  </>
                )}
              </Loaded>
            </Section>
            <Section title="Allocations" actions={<Updating state={events} />}>
              <Loaded state={events}>
                {(e) => (
                  <>
                    {e.truncated && <div className="notes-inline">Showing the first {e.rows.length} of {e.total} allocations: select a smaller range to see the rest.</div>}
                    <DataTable rows={e.rows} cols={eventCols} exportName={[sel.run, "memory-events", device]} initialSort={{ id: "alloc", desc: false }} filterPlaceholder="Filter by operator…" emptyText={range ? "No allocations in this range." : "No allocation/free pairs (see the notes above)."} />
                  </>
                )}
              </Loaded>
            </Section>
            <Section title="Copy bandwidth">
              <MemcpySection sel={sel} dark={dark} />
            </Section>
          </div>
        );
      }}
    </Loaded>
  );
}
