// Trace: the timeline of the selected span (timeline/Timeline) fed window by window
// from the server, with search (the server finds matches in the whole trace: count,
// next/previous jump and select), flows (the selection's arrows, optionally every
// arrow in view), device utilization and memory counters, a details panel, and the
// statistics of a time range selected on the ruler (trace/RangeStats), and a step's
// critical path highlighted (URL key cp: its events outlined, its spans on the ruler), a typed
// range (trace/TypedRange: "step 17 +100ms..+110ms" selects and shows it, in the URL as r0/r1
// like a dragged one), and times relative to the steps (the overview's: the ruler's step marks,
// the tooltip, the band, the details). In a
// distributed run a toggle switches to the Ranks mode (trace/Ranks): several ranks'
// timelines on one time axis.

import { useEffect, useMemo, useRef, useState, type ReactNode } from "react";
import type { ViewProps } from "./props";
import { absoluteUrl } from "../api/client";
import { useApi } from "../api/hooks";
import type { MemoryCurveReply } from "../api/types/memory";
import type { OverviewReply } from "../api/types/overview";
import type { EventDetailReply, SearchMatch, SearchReply, TimelineReply } from "../api/types/trace";
import { Empty, ErrorBox, Notes, Progress, Tabs } from "../components/common";
import { setState } from "../state/store";
import { Timeline, type Counter, type CursorEvent, type FlowLink } from "../timeline/Timeline";
import { fitRange, isWellVisible, jumpWindow, type Range } from "../timeline/coords";
import { fmtBytes, fmtCount, fmtDuration } from "../util/format";
import { parseRange } from "../timeline/rangeSelect";
import { stepSpans, type StepSpan } from "../timeline/steps";
import { TypedRangeBox } from "./trace/TypedRange";
import { useTimelineWindow } from "./trace/useWindow";
import { TraceRanksView } from "./trace/Ranks";
import { joinableDevice, useSnapshotOverlay } from "./memory/overlay";
import { windowCounters } from "./trace/counters";
import { Details, selectionFlows } from "./trace/Details";
import { RangeStats } from "./trace/RangeStats";
import { KeysOverlay, useTraceKeys } from "./trace/Keys";
import { highlightFromSegments, type CriticalPathReply } from "./why/CriticalPath";

export { selectionFlows };

/** Matches asked of the server at a time (next/previous beyond them asks for the next page). */
const SEARCH_PAGE = 200;

export function TraceView(props: ViewProps) {
  const views = useApi<string[]>(props.sel.run ? "views" : null, { run: props.sel.run });
  const canRanks = (views.data ?? []).includes("Distributed");
  const ranksMode = canRanks && props.st.tmode === "ranks";
  const toggle = canRanks ? <ModeToggle ranks={ranksMode} /> : null;
  return ranksMode ? <TraceRanksView {...props} modeToggle={toggle} /> : <SingleTraceView {...props} modeToggle={toggle} />;
}

/** One worker's trace, or the chosen ranks' traces on one time axis. */
function ModeToggle({ ranks }: { ranks: boolean }) {
  return (
    <Tabs
      label="Trace of one worker or of several ranks"
      value={ranks ? "ranks" : "one"}
      onChange={(v) => setState({ tmode: v === "ranks" ? "ranks" : undefined, t0: undefined, t1: undefined, ev: undefined, r0: undefined, r1: undefined, cp: undefined })}
      options={[{ value: "one", label: "One worker" }, { value: "ranks", label: "Ranks" }]}
    />
  );
}

function SingleTraceView({ st, sel, dark, modeToggle }: ViewProps & { modeToggle: ReactNode }) {
  const selKey = `${sel.run}\u0000${sel.worker ?? ""}\u0000${sel.span ?? ""}`;
  const { data, bounds, vp, setVp, error, progress, loading, width } = useTimelineWindow<TimelineReply>("trace", sel, selKey, st.t0, st.t1);
  const [search, setSearch] = useState(st.find ?? "");  // a link may start a search (find)
  const [reveal, setReveal] = useState<{ track: number; depth: number; nonce: number } | null>(null);
  const revealNext = useRef(false);
  // the time range selected on the ruler (whole ns on the timeline's clock), kept in the URL
  // (r0, r1) so a reload or a shared link shows it; choosing another trace clears it
  const rangeSel = useMemo(() => parseRange(st.r0, st.r1), [st.r0, st.r1]);
  const setRangeSel = (r: Range | null) =>
    setState({ r0: r ? String(r.start) : undefined, r1: r ? String(r.end) : undefined });
  // the steps, for step-relative times and the typed range (null while loading; none for a
  // trace without ProfilerStep#N, whose one "step" is the whole trace)
  const ov = useApi<OverviewReply>("overview", sel);
  const steps = useMemo<StepSpan[] | null>(() => (ov.data ? (ov.data.summary.whole_trace_step ? [] : stepSpans(ov.data.steps))
    : ov.error ? [] : null), [ov.data, ov.error]);

  // memory as counter tracks over the window (traces without memory records: none)
  const [showMem, setShowMem] = useState(true);
  const memWin = vp && bounds ? { start: Math.max(bounds.start, Math.floor(vp.start)), end: Math.ceil(vp.end) } : null;
  const [memKey, setMemKey] = useState<{ start: number; end: number } | null>(null);
  useEffect(() => {
    const t = setTimeout(() => setMemKey(memWin), 250);
    return () => clearTimeout(t);
  }, [memWin?.start, memWin?.end]); // eslint-disable-line react-hooks/exhaustive-deps
  const mem = useApi<MemoryCurveReply>(showMem && memKey ? "memory_curve" : null, {
    ...sel,
    start_ns: memKey?.start,
    end_ns: memKey?.end,
    max_points: Math.min(20000, Math.max(10, Math.round((vp?.width ?? 1000) * 2))),
  }, { keepStale: true });
  // the run's memory snapshot (issue 20) as one more track, under the trace's own curve
  const snapDevice = joinableDevice(showMem ? mem.data : null);
  const snap = useSnapshotOverlay(sel, showMem ? mem.data : null, snapDevice, memKey);
  const counters = useMemo<Counter[]>(() => {
    const d = mem.data;
    if (!d || !showMem) return [];
    const own = d.devices
      .filter((dev) => (d.curves[dev] ?? []).length > 0)
      .map((dev) => ({
        name: `Memory allocated, ${dev}`,
        points: d.curves[dev].map((p) => [p.ts_ns, p.allocated] as [number, number | null]),
        format: (v: number) => fmtBytes(v),
      }));
    const joined = snap ? [{ name: `${snap.name}, ${snapDevice}`, points: snap.data as [number, number | null][],
      format: (v: number) => fmtBytes(v) }] : [];
    return [...own, ...joined];
  }, [mem.data, showMem, snap, snapDevice]);

  // the critical path of step cp (from the Overview's "Show in Trace"), highlighted
  const cpStep = st.cp && /^-?\d+$/.test(st.cp) ? Number(st.cp) : null;
  const cp = useApi<CriticalPathReply>(cpStep !== null ? "critical_path" : null, { ...sel, step: cpStep ?? undefined });
  const cpData = cpStep !== null && cp.data && cp.data.step === cpStep ? cp.data : null;
  const lit = useMemo(() => (cpData ? highlightFromSegments(cpData.segments) : null), [cpData]);
  const cpRow = cpData?.steps.find((r) => r.step === cpStep) ?? null;

  const selected = st.ev && /^\d+$/.test(st.ev) ? Number(st.ev) : null;
  const details = useApi<EventDetailReply>(selected !== null ? "trace/event" : null, { ...sel, i: selected ?? undefined });
  // the selection's row and times, for the timeline's keyboard cursor when the window does not carry it
  const anchor = useMemo<CursorEvent | null>(() => {
    const e = details.data?.event;
    return e && e.i === selected ? { ...e, depth: e.depth ?? 0 } : null;
  }, [details.data, selected]);

  const zoomTo = (d: EventDetailReply) => {
    if (!bounds || !vp) return;
    setVp(fitRange(d.event.ts_ns, d.event.ts_ns + Math.max(d.event.dur_ns, 1), vp.width, bounds, 0.5));
    setReveal({ track: d.event.track, depth: d.event.depth ?? 0, nonce: Date.now() });
  };

  useEffect(() => {
    const d = details.data;
    if (!d || !revealNext.current || !vp) return;
    revealNext.current = false;
    const e = d.event;
    if (e.ts_ns + e.dur_ns < vp.start || e.ts_ns > vp.end || e.dur_ns > 0 && (vp.end - vp.start) / vp.width > e.dur_ns * 50) zoomTo(d);
    else setReveal({ track: e.track, depth: e.depth ?? 0, nonce: Date.now() });
  }, [details.data]); // eslint-disable-line react-hooks/exhaustive-deps

  // arrows: the selection's (from its details), and with "Flows in view" every one the window carries
  const [showFlows, setShowFlows] = useState(false);
  const flows = useMemo<FlowLink[]>(() => {
    const d = details.data;
    const mine = d && selected !== null && d.event.i === selected ? selectionFlows(d) : [];
    if (!showFlows || !data?.flows) return mine;
    const all = data.flows.map((f) => ({
      from: { i: f.from, ts_ns: f.from_ts_ns, track: f.from_track, depth: f.from_depth },
      to: { i: f.to, ts_ns: f.to_ts_ns, track: f.to_track, depth: f.to_depth },
      kind: f.kind,
      faint: true,
    }));
    return [...all, ...mine];
  }, [details.data, selected, showFlows, data?.flows]);

  // search: the server counts and lists the matches over the whole trace, a page at a time
  const [q, setQ] = useState("");
  useEffect(() => {
    const t = setTimeout(() => setQ(search.trim()), 250);
    return () => clearTimeout(t);
  }, [search]);
  const [searchPage, setSearchPage] = useState(0);
  const [hit, setHit] = useState<{ k: number; nonce: number } | null>(null);
  useEffect(() => {
    setSearchPage(0);
    setHit(null);
  }, [q, selKey]);
  const found = useApi<SearchReply>(q ? "trace/search" : null, { ...sel, q, limit: SEARCH_PAGE, offset: searchPage * SEARCH_PAGE }, { keepStale: true });
  const answer = found.data && found.data.q === q && q ? found.data : null;

  // The match and its window go into the URL in one write: the window-in-URL effect then
  // agrees with the view at once, and no older window waiting to be written can win.
  const jump = (m: SearchMatch) => {
    const win = vp && bounds && !isWellVisible(m.ts_ns, m.dur_ns, vp) ? jumpWindow(m.ts_ns, m.dur_ns, vp.width, bounds) : null;
    setState({ ev: String(m.i), ...(win ? { t0: String(Math.floor(win.start)), t1: String(Math.ceil(win.end)) } : {}) });
    if (win) setVp(win);
    setReveal({ track: m.track, depth: m.depth, nonce: Date.now() });
  };
  const step = (delta: number) => {
    if (!answer || !answer.count) return;
    const k = hit === null ? (delta > 0 ? 0 : answer.count - 1) : (((hit.k + delta) % answer.count) + answer.count) % answer.count;
    setHit({ k, nonce: Date.now() });
    const page = Math.floor(k / SEARCH_PAGE);
    if (page !== searchPage) setSearchPage(page);
  };
  // jump once the page holding the wanted match is there
  const jumped = useRef<number | null>(null);
  useEffect(() => {
    if (!hit || !answer || jumped.current === hit.nonce) return;
    const m = answer.matches[hit.k - answer.offset];
    if (!m || answer.offset !== searchPage * SEARCH_PAGE) return;
    jumped.current = hit.nonce;
    jump(m);
  }, [hit, answer]); // eslint-disable-line react-hooks/exhaustive-deps

  // device utilization (from the window's reply) above the memory counters
  const [showUtil, setShowUtil] = useState(true);
  const searchRef = useRef<HTMLInputElement | null>(null);
  const stepRef = useRef(step);
  stepRef.current = step;
  const stepLatest = useMemo(() => (d: number) => stepRef.current(d), []);
  const [keysOpen, setKeysOpen] = useTraceKeys(searchRef, stepLatest);
  const utilCounters = useMemo<Counter[]>(() => (showUtil ? windowCounters(data?.counters) : []),
    [data?.counters, showUtil]);
  const allCounters = useMemo(() => [...utilCounters, ...counters], [utilCounters, counters]);

  if (error && !data) return <ErrorBox error={error} />;
  if (!data || !bounds || !vp) return <Progress progress={progress} />;
  if (!data.tracks.length) {
    return (
      <Empty title="Nothing to draw">
        {data.notes?.[0] ?? "This trace has no complete events (ph X) to show on a timeline."}
      </Empty>
    );
  }
  const span = vp.end - vp.start;
  return (
    <div className="view trace-view">
      <div className="controls">
        {modeToggle}
        <span className="search-box" role="search" style={{ display: "inline-flex", alignItems: "center", gap: 4 }}>
          <input
            ref={searchRef}
            type="search"
            className="filter"
            placeholder="Search events by name… (/)"
            value={search}
            maxLength={200}
            onChange={(e) => setSearch(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter") {
                e.preventDefault();
                step(e.shiftKey ? -1 : 1);
              }
            }}
            aria-label="Search events by name"
            title="Enter: next match, Shift+Enter: previous"
          />
          {q && (
            <span className="muted search-count" data-count={answer?.count ?? ""} aria-live="polite">
              {found.error ? found.error.message : !answer ? "searching…" : answer.count === 0 ? "no matches"
                : `${hit !== null ? `${fmtCount(hit.k + 1)} / ` : ""}${fmtCount(answer.count)} ${answer.count === 1 ? "match" : "matches"}`}
            </span>
          )}
          <button type="button" className="small" aria-label="Previous match" title="Previous match (Shift+Enter)" disabled={!answer?.count} onClick={() => step(-1)}>
            ‹
          </button>
          <button type="button" className="small" aria-label="Next match" title="Next match (Enter)" disabled={!answer?.count} onClick={() => step(1)}>
            ›
          </button>
        </span>
        <TypedRangeBox
          steps={steps}
          bounds={bounds}
          range={rangeSel}
          onRange={(r) => {
            setRangeSel(r);
            setVp(fitRange(r.start, r.end, vp.width, bounds, 0.05));
          }}
        />
        <button type="button" className="small" onClick={() => setVp({ start: bounds.start, end: bounds.end, width: vp.width })}>
          Whole trace
        </button>
        <button type="button" className="small" aria-label="Keyboard shortcuts" title="Keyboard shortcuts (?)" onClick={() => setKeysOpen(true)}>
          ?
        </button>
        {keysOpen && <KeysOverlay onClose={() => setKeysOpen(false)} />}
        <button type="button" className="small" onClick={() => setVp(fitRange(vp.start + span * 0.25, vp.end - span * 0.25, vp.width, bounds, 0))}>
          Zoom in
        </button>
        <button type="button" className="small" onClick={() => setVp(fitRange(vp.start - span / 2, vp.end + span / 2, vp.width, bounds, 0))}>
          Zoom out
        </button>
        {(data.counters?.length ?? 0) > 0 && (
          <label className="check" title="Per device, the fraction of each pixel's time during which a kernel ran">
            <input type="checkbox" checked={showUtil} onChange={(e) => setShowUtil(e.target.checked)} /> {data.counters?.[0]?.name.split(" ")[0] ?? "GPU"} utilization
          </label>
        )}
        <label className="check" title="Every arrow in view: CPU launch → kernel, forward → backward (the selection's arrows are always drawn)">
          <input type="checkbox" checked={showFlows} onChange={(e) => setShowFlows(e.target.checked)} /> Flows in view
        </label>
        <label className="check" title="Memory allocated per device, from the trace's memory records">
          <input type="checkbox" checked={showMem} onChange={(e) => setShowMem(e.target.checked)} /> Memory counters
        </label>
        <a className="button small" href={absoluteUrl("trace/raw", sel)} download title="The trace file, for Perfetto or chrome://tracing">
          Download trace
        </a>
        <span className="spacer" />
        <span className="muted" title="Visible window, from the trace's first event">
          {fmtDuration(vp.start)} – {fmtDuration(vp.end)} ({fmtDuration(span)}) · {fmtCount(data.counts.events)} events
          {data.counts.busy ? `, ${fmtCount(data.counts.busy)} merged blocks` : ""}
          {data.truncated ? " · more events than can be drawn: zoom in" : ""}
        </span>
      </div>
      <Notes notes={data.notes} />
      {error && <ErrorBox error={error} />}
      {cpStep !== null && (
        <div className="cp-banner" role="status" data-step={cpStep} style={{ display: "flex", alignItems: "center", gap: 8, flexWrap: "wrap", padding: "4px 10px", margin: "0 0 6px", borderLeft: "4px solid #e8590c", background: "rgba(232,89,12,0.10)", borderRadius: 4 }}>
          <span>
            {cp.error ? `Critical path of step ${cpStep}: ${cp.error.message}`
              : !cpRow ? `Critical path of step ${cpStep}: loading…`
              : <>Critical path of step <b>{cpStep}</b>: device {fmtDuration(cpRow.device_ns)}, host {fmtDuration(cpRow.host_ns)}
                  {cpRow.sync_ns > 0 ? `, sync ${fmtDuration(cpRow.sync_ns)}` : ""} of {fmtDuration(cpRow.length_ns)}
                  {cpData && cpData.segments_total > cpData.segments.length ? ` (the first ${fmtCount(cpData.segments.length)} of ${fmtCount(cpData.segments_total)} segments)` : ""}</>}
          </span>
          <span className="muted small">Outlined: its events; on the ruler: <span style={{ color: "#e8590c" }}>■</span> host, <span style={{ color: "#3056c8" }}>■</span> device, <span style={{ color: "#c5221f" }}>■</span> sync</span>
          <span className="spacer" style={{ flex: 1 }} />
          <button type="button" className="small" onClick={() => setState({ cp: undefined })}>Clear</button>
        </div>
      )}
      <div className={selected !== null ? "trace-grid with-details" : "trace-grid"}>
        <Timeline
          tracks={data.tracks}
          events={data.events}
          busy={data.busy}
          bounds={bounds}
          vp={vp}
          onViewport={(v) => {
            width.current = v.width;
            setVp(v);
          }}
          selected={selected}
          onSelect={(i, byKey) => setState({ ev: i === null ? undefined : String(i) }, byKey)}
          flows={flows}
          search={search}
          dark={dark}
          height={Math.max(360, Math.min(900, (typeof window !== "undefined" ? window.innerHeight : 800) - 190))}
          loading={loading}
          reveal={reveal}
          counters={allCounters}
          selection={rangeSel}
          onSelectRange={setRangeSel}
          highlight={lit?.ids ?? null}
          highlightSpans={lit?.spans ?? null}
          steps={steps}
          anchor={anchor}
        />
        {selected !== null && (
          <aside className="side-panel" aria-label="Event details">
            <div className="side-head">
              <b>Event</b>
              <button type="button" className="icon-btn" aria-label="Close details" onClick={() => setState({ ev: undefined })}>✕</button>
            </div>
            {details.error ? (
              <ErrorBox error={details.error} />
            ) : details.data ? (
              <Details
                d={details.data}
                steps={steps}
                onPick={(i) => {
                  revealNext.current = true;
                  setState({ ev: String(i) });
                }}
                onZoom={() => details.data && zoomTo(details.data)}
              />
            ) : (
              <Progress progress={details.progress} />
            )}
          </aside>
        )}
      </div>
      {rangeSel && (
        <RangeStats
          sel={sel}
          range={rangeSel}
          steps={steps}
          onZoom={() => setVp(fitRange(rangeSel.start, rangeSel.end, vp.width, bounds, 0))}
          onClose={() => setRangeSel(null)}
        />
      )}
      <div className="muted small-note">
        Ctrl/⌘ + wheel or W/S: zoom · drag, A/D or horizontal wheel: pan · wheel: scroll tracks · Shift + drag: zoom to a range ·
        drag on the time ruler or type a range ("step 17 +100ms..+110ms"): statistics of a range (Escape clears it) ·
        ] / [: next / previous event · ? lists every key ·
        click a track header to fold it · click a grey block to zoom into it · click an event for details. Times are from the trace's first event.
      </div>
    </div>
  );
}
