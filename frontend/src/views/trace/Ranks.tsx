// The Trace view's Ranks mode: the timelines of up to 8 ranks (default: the 4 slowest,
// from distributed/ranks) on one time axis (trace/ranks), drawn by the same Timeline and
// fetched window by window as the single-trace view is; a line says how each rank's
// clock was aligned; a click on an event shows its details (trace/event of its worker).

import { useMemo, useState, type ReactNode } from "react";
import type { ViewProps } from "../props";
import { useApi, type ApiState } from "../../api/hooks";
import type { DistRanksReply, RankRow } from "../../api/types/distributed";
import type { EventDetailReply, RanksTimelineReply, RankAlignment } from "../../api/types/trace";
import { Empty, ErrorBox, Loaded, Notes, Progress } from "../../components/common";
import { Name } from "../../components/Name";
import { setState } from "../../state/store";
import { Timeline, type Counter, type FlowLink } from "../../timeline/Timeline";
import { fitRange, type Range, type Viewport } from "../../timeline/coords";
import { fmtCount, fmtDeltaDuration, fmtDuration } from "../../util/format";
import { METHOD_WORDS, orderRanks } from "../distributed/data";
import { windowCounters } from "./counters";
import { Details, selectionFlows } from "./Details";
import { detailsOnAxis, splitId, withGlobalIds } from "./merge";
import { parseRanks, RankPicker } from "./RankPicker";
import { useTimelineWindow } from "./useWindow";

/** Ranks shown when none are chosen: the slowest ones. */
export const DEFAULT_RANKS = 4;

/** The alignment of each worker shown, in the order of the chosen ranks. */
export function alignments(reply: RanksTimelineReply, rows: RankRow[]): RankAlignment[] {
  const byWorker = new Map(rows.map((r) => [r.worker, r]));
  return (reply.workers ?? []).map((w) => {
    const r = byWorker.get(w.worker);
    return { ...w, rank: w.rank ?? r?.rank ?? null, clock_method: w.clock_method ?? r?.clock_method ?? null };
  });
}

/** "rank 5 (w5) +10 µs [clock -289 µs by collectives], rank 7 (w7) 0": each worker's shift onto the common axis, and its clock's correction. */
export function alignmentText(al: RankAlignment[]): string {
  return al
    .map((a) => {
      const clock = a.clock_offset_ns ? ` [clock ${fmtDeltaDuration(a.clock_offset_ns)}${a.clock_method ? ` by ${a.clock_method}` : ""}]` : "";
      return `rank ${a.rank ?? "?"} (${a.worker}) ${fmtDeltaDuration(a.offset_ns)}${clock}`;
    })
    .join(", ");
}

function Alignment({ al }: { al: RankAlignment[] }) {
  if (!al.length) return null;
  return (
    <div className="muted alignment" data-offsets={al.map((a) => `${a.worker}=${a.offset_ns}`).join("|")}>
      Aligned on one time axis (from the earliest rank's first event), each rank's shift: <Name text={alignmentText(al)} />.
      {al.some((a) => a.clock_method === "collectives") ? ` Clocks corrected by collectives: ${METHOD_WORDS.collectives}.` : ""}
    </div>
  );
}

export function TraceRanksView({ st, sel, dark, modeToggle }: ViewProps & { modeToggle: ReactNode }) {
  const ranks = useApi<DistRanksReply>("distributed/ranks", { run: sel.run, span: sel.span });
  return (
    <Loaded state={ranks}>
      {(d) => <RanksTimeline d={d} st={st} sel={sel} dark={dark} modeToggle={modeToggle} />}
    </Loaded>
  );
}

function RanksTimeline({ d, st, sel, dark, modeToggle }: Omit<ViewProps, "sel"> & { d: DistRanksReply; sel: ViewProps["sel"]; modeToggle: ReactNode }) {
  const rows = useMemo(() => orderRanks(d), [d]);
  const known = useMemo(() => new Set(rows.map((r) => r.rank)), [rows]);
  const chosen = parseRanks(st.ranks, known) ?? rows.slice(0, DEFAULT_RANKS).map((r) => r.rank);
  const byRank = useMemo(() => new Map(rows.map((r) => [r.rank, r])), [rows]);
  const workers = chosen.map((r) => byRank.get(r)!.worker);
  const params = workers.length ? { run: sel.run, span: sel.span, workers: workers.join(",") } : null;
  const selKey = `${sel.run}\u0000${sel.span ?? ""}\u0000${workers.join(",")}`;
  const { data, bounds, vp, setVp, error, progress, loading, width } = useTimelineWindow<RanksTimelineReply>("trace/ranks", params, selKey, st.t0, st.t1);
  const [showUtil, setShowUtil] = useState(true);
  const [showFlows, setShowFlows] = useState(false);

  // selection: a global id (merge.ts): which rank's event, and its index in that rank's trace
  const selected = st.ev && /^\d+$/.test(st.ev) ? Number(st.ev) : null;
  const sel0 = selected !== null ? splitId(selected) : null;
  const selWorker = sel0 && sel0.k < workers.length ? workers[sel0.k] : null;
  const al = useMemo(() => (data ? alignments(data, rows) : []), [data, rows]);
  const merged = useMemo(() => (data ? withGlobalIds(data) : null), [data]);
  const raw = useApi<EventDetailReply>(selWorker && sel0 ? "trace/event" : null, { run: sel.run, span: sel.span, worker: selWorker ?? undefined, i: sel0?.i });
  const details = useMemo(() => (raw.data && data && sel0 ? detailsOnAxis(raw.data, sel0.k, data) : null), [raw.data, data, sel0?.k]); // eslint-disable-line react-hooks/exhaustive-deps
  const [reveal, setReveal] = useState<{ track: number; depth: number; nonce: number } | null>(null);

  const counters = useMemo<Counter[]>(() => (showUtil ? windowCounters(data?.counters) : []),
    [data?.counters, showUtil]);
  const flows = useMemo<FlowLink[]>(() => {
    const mine = details && selected !== null && details.event.i === selected ? selectionFlows(details) : [];
    if (!showFlows || !merged) return mine;
    const all = merged.flows.map((f) => ({
      from: { i: f.from, ts_ns: f.from_ts_ns, track: f.from_track, depth: f.from_depth },
      to: { i: f.to, ts_ns: f.to_ts_ns, track: f.to_track, depth: f.to_depth },
      kind: f.kind,
      faint: true,
    }));
    return [...all, ...mine];
  }, [showFlows, merged, details, selected]);

  const zoomTo = (d: EventDetailReply) => {
    if (!bounds || !vp) return;
    setVp(fitRange(d.event.ts_ns, d.event.ts_ns + Math.max(d.event.dur_ns, 1), vp.width, bounds, 0.5));
    setReveal({ track: d.event.track, depth: d.event.depth ?? 0, nonce: Date.now() });
  };

  const picker = <RankPicker rows={rows} chosen={chosen} onChange={(r) => setState({ ranks: r.join(","), t0: undefined, t1: undefined, ev: undefined })} />;
  const ready = data && bounds && vp ? { data, bounds, vp } : null;
  return (
    <div className="view trace-view trace-ranks" data-ranks={chosen.join(",")} data-workers={workers.join("|")}>
      <div className="controls">
        {modeToggle}
        {picker}
        {(data?.counters?.length ?? 0) > 0 && (
          <label className="check">
            <input type="checkbox" checked={showUtil} onChange={(e) => setShowUtil(e.target.checked)} /> Utilization
          </label>
        )}
        <label className="check" title="Every arrow in view: CPU launch → kernel, forward → backward">
          <input type="checkbox" checked={showFlows} onChange={(e) => setShowFlows(e.target.checked)} /> Flows in view
        </label>
        {ready && <WindowControls {...ready} setVp={setVp} />}
      </div>
      {error && <ErrorBox error={error} />}
      {!ready ? (error ? null : <Progress progress={progress} />) : body(ready)}
    </div>
  );

  // (a function called in place, not a component: the Timeline keeps its state across renders)
  function body({ data, bounds, vp }: NonNullable<typeof ready>) {
    return (
      <>
        <Alignment al={al} />
        <Notes notes={data.notes} />
        {!data.tracks.length ? (
          <Empty title="Nothing to draw">{data.notes?.[0] ?? "These ranks' traces have no complete events (ph X) to show."}</Empty>
        ) : (
          <div className={selected !== null ? "trace-grid with-details" : "trace-grid"}>
            <Timeline
              tracks={data.tracks}
              events={merged?.events ?? []}
              busy={data.busy}
              bounds={bounds}
              vp={vp}
              onViewport={(v) => {
                width.current = v.width;
                setVp(v);
              }}
              selected={selected}
              onSelect={(i) => setState({ ev: i === null ? undefined : String(i) })}
              flows={flows}
              search=""
              dark={dark}
              height={Math.max(360, Math.min(900, (typeof window !== "undefined" ? window.innerHeight : 800) - 220))}
              loading={loading}
              reveal={reveal}
              counters={counters}
            />
            {selected !== null && <DetailsPanel worker={selWorker} raw={raw} details={details} onZoom={zoomTo} />}
          </div>
        )}
        <div className="muted small-note">
          Ctrl/⌘ + wheel or W/S: zoom · drag, A/D: pan · wheel: scroll tracks · Shift + drag: zoom to a range · click an event for details.
          Each track's process is prefixed by its rank's worker; search and memory counters are in the single-worker mode.
        </div>
      </>
    );
  }
}

/** The selected event's details (trace/event of its worker, moved onto the merged axis). */
function DetailsPanel({ worker, raw, details, onZoom }: { worker: string | null; raw: ApiState<EventDetailReply>; details: EventDetailReply | null; onZoom: (d: EventDetailReply) => void }) {
  return (
    <aside className="side-panel" aria-label="Event details">
      <div className="side-head">
        <b>Event</b>
        {worker && <Name className="muted mono" text={worker} />}
        <button type="button" className="icon-btn" aria-label="Close details" onClick={() => setState({ ev: undefined })}>✕</button>
      </div>
      {!worker ? (
        <div className="muted">This event's rank is no longer shown.</div>
      ) : raw.error ? (
        <ErrorBox error={raw.error} />
      ) : details ? (
        <Details d={details} onPick={(g) => setState({ ev: String(g) })} onZoom={() => onZoom(details)} />
      ) : (
        <Progress progress={raw.progress} />
      )}
    </aside>
  );
}

/** Whole trace / zoom buttons and what the window shows. */
function WindowControls({ data, bounds, vp, setVp }: { data: RanksTimelineReply; bounds: Range; vp: Viewport; setVp: (v: Viewport) => void }) {
  const span = vp.end - vp.start;
  return (
    <>
      <button type="button" className="small" onClick={() => setVp({ start: bounds.start, end: bounds.end, width: vp.width })}>Whole trace</button>
      <button type="button" className="small" onClick={() => setVp(fitRange(vp.start + span * 0.25, vp.end - span * 0.25, vp.width, bounds, 0))}>Zoom in</button>
      <button type="button" className="small" onClick={() => setVp(fitRange(vp.start - span / 2, vp.end + span / 2, vp.width, bounds, 0))}>Zoom out</button>
      <span className="spacer" />
      <span className="muted" title="Visible window, on the common time axis">
        {fmtDuration(vp.start)} – {fmtDuration(vp.end)} ({fmtDuration(span)}) · {fmtCount(data.counts.events)} events
        {data.counts.busy ? `, ${fmtCount(data.counts.busy)} merged blocks` : ""}
        {data.truncated ? " · more events than can be drawn: zoom in" : ""}
      </span>
    </>
  );
}
