// Trace: the timeline of the selected span (timeline/Timeline) fed window by window
// from the server, with search (the server finds matches in the whole trace: count,
// next/previous jump and select), flows (the selection's arrows, optionally every
// arrow in view), device utilization and memory counters, and a details panel.

import { useEffect, useMemo, useRef, useState } from "react";
import type { ViewProps } from "../App";
import { absoluteUrl, getJson } from "../api/client";
import { useApi } from "../api/hooks";
import type { EventDetailReply, EventLink, MemoryCurveReply, SearchMatch, SearchReply, TimelineReply } from "../api/types";
import { Empty, ErrorBox, KeyValues, Notes, Progress } from "../components/common";
import { setState } from "../state/store";
import { Timeline, type Counter, type FlowEnd, type FlowLink } from "../timeline/Timeline";
import { binPoints, fitRange, isWellVisible, jumpWindow, type Range, type Viewport } from "../timeline/coords";
import { fmtBytes, fmtCount, fmtDuration, fmtWallTime } from "../util/format";
import type { LoadingReply } from "../api/types";
import { FrameItem, StackFrames } from "../components/StackFrames";
import { isStackArg, parseCallStack, parseFrame } from "../util/frames";

function parseNs(s: string | undefined): number | null {
  if (!s || !/^\d+$/.test(s)) return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}

function argText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

/** Matches asked of the server at a time (next/previous beyond them asks for the next page). */
const SEARCH_PAGE = 200;

// How a linked event relates to the selected one, in words; and which links point away from it.
const RELATION_WORDS: Record<string, string> = {
  launched_by: "launched by", operator: "issued by operator", launched: "launched", forward: "forward op",
  backward: "backward op", flow_to: "flow to", flow_from: "flow from",
};
const OUTGOING = new Set(["launched", "backward", "flow_to"]);

/** The selection's arrows, from the links of its details (with their ends' rows). */
export function selectionFlows(d: EventDetailReply): FlowLink[] {
  const e = d.event;
  const self: FlowEnd = { i: e.i, ts_ns: e.ts_ns, track: e.track, depth: e.depth ?? 0 };
  const out: FlowLink[] = [];
  for (const l of d.links) {
    if (l.ts_ns === undefined || l.track === undefined) continue;
    const other: FlowEnd = { i: l.i, ts_ns: l.ts_ns, track: l.track, depth: l.depth ?? 0 };
    const kind = l.relation === "operator" ? "operator" : l.relation === "forward" || l.relation === "backward" ? "fwdbwd" : "launch";
    out.push(OUTGOING.has(l.relation) ? { from: self, to: other, kind } : { from: other, to: self, kind });
  }
  return out;
}

function LinkItem({ l, onPick }: { l: EventLink; onPick: (i: number) => void }) {
  return (
    <li data-relation={l.relation} data-i={l.i}>
      <span className="muted">{RELATION_WORDS[l.relation] ?? l.relation}</span>{" "}
      <button type="button" className="link" onClick={() => onPick(l.i)} title={l.cat}>
        {l.name}
      </button>
      {l.dur_ns !== undefined && <span className="muted"> · {fmtDuration(l.dur_ns)}</span>}
    </li>
  );
}

function Details({ d, onPick, onZoom }: { d: EventDetailReply; onPick: (i: number) => void; onZoom: () => void }) {
  const e = d.event;
  const args = Object.entries(d.args ?? {});
  // python_function events are named by their frame: "file.py(12): func"
  // (the server's frame carries the resolved path VS Code can open; parsed here otherwise)
  const src = d.source ?? (e.cat === "python_function" ? parseFrame(e.name) : null);
  return (
    <div className="details">
      <div className="details-name selectable">{e.name}</div>
      {src?.file && (
        <ol className="frames" aria-label="Source">
          <FrameItem frame={src} />
        </ol>
      )}
      <div className="details-actions">
        <button type="button" className="small" onClick={onZoom}>Zoom to event</button>
      </div>
      <KeyValues
        items={[
          ["Category", e.cat],
          ["Start", `${fmtDuration(e.ts_ns)} after the trace start`],
          ...(d.origin_ns ? [["Wall time", fmtWallTime(d.wall_origin_ns ?? d.origin_ns, e.ts_ns)] as [string, string]] : []),
          ["Duration", fmtDuration(e.dur_ns)],
          ["Process", e.pid],
          ["Thread / stream", e.tid],
          ...(e.launched_by_graph ? [["Launched by", "a graph launch (one call, many kernels)"] as [string, string]] : []),
        ]}
      />
      {d.links.length > 0 && (
        <>
          <h3>Linked events</h3>
          <ul className="links">
            {d.links.map((l, k) => <LinkItem key={k} l={l} onPick={onPick} />)}
          </ul>
        </>
      )}
      <h3>Arguments</h3>
      {args.length ? (
        <dl className="kv args">
          {args.map(([k, v]) => (
            <div key={k} className="kv-row">
              <dt>{k}</dt>
              <dd className="selectable mono">{isStackArg(k, v) ? <StackFrames frames={d.stacks?.[k] ?? parseCallStack(v)} /> : argText(v)}</dd>
            </div>
          ))}
        </dl>
      ) : (
        <div className="muted">No arguments.</div>
      )}
    </div>
  );
}

export function TraceView({ st, sel, dark }: ViewProps) {
  const selKey = `${sel.run}\u0000${sel.worker ?? ""}\u0000${sel.span ?? ""}`;
  const [data, setData] = useState<TimelineReply | null>(null);
  const [bounds, setBounds] = useState<Range | null>(null);
  const [vp, setVp] = useState<Viewport | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [progress, setProgress] = useState<LoadingReply | null>(null);
  const [loading, setLoading] = useState(false);
  const [search, setSearch] = useState("");
  const [reveal, setReveal] = useState<{ track: number; depth: number; nonce: number } | null>(null);
  const revealNext = useRef(false);
  const width = useRef(1200);

  // a new selection: start over
  useEffect(() => {
    setData(null);
    setBounds(null);
    setVp(null);
    setError(null);
  }, [selKey]);

  const t0 = parseNs(st.t0);
  const t1 = parseNs(st.t1);

  // fetch the window (debounced while zooming / panning)
  const want = vp ?? (t0 !== null && t1 !== null && t1 > t0 ? { start: t0, end: t1, width: width.current } : null);
  const reqStart = want ? Math.floor(want.start) : null;
  const reqEnd = want ? Math.ceil(want.end) : null;
  const reqWidth = Math.min(10000, Math.max(100, Math.round(want?.width ?? width.current)));
  useEffect(() => {
    const ctrl = new AbortController();
    const timer = setTimeout(() => {
      setLoading(true);
      getJson<TimelineReply>(
        "trace",
        { ...sel, start_ns: reqStart ?? undefined, end_ns: reqEnd ?? undefined, width: reqWidth },
        ctrl.signal,
        (p) => setProgress(p),
      )
        .then((r) => {
          setProgress(null);
          setError(null);
          setData(r);
          setLoading(false);
          const b = { start: r.span.start_ns, end: Math.max(r.span.end_ns, r.span.start_ns + 1) };
          setBounds((old) => (old && old.start === b.start && old.end === b.end ? old : b));
          setVp((old) => old ?? { start: r.window.start_ns, end: Math.max(r.window.end_ns, r.window.start_ns + 1), width: width.current });
        })
        .catch((e: unknown) => {
          if (ctrl.signal.aborted) return;
          setLoading(false);
          setError(e instanceof Error ? e : new Error(String(e)));
        });
    }, data ? 150 : 0);
    return () => {
      clearTimeout(timer);
      ctrl.abort();
    };
  }, [selKey, reqStart, reqEnd, reqWidth]); // eslint-disable-line react-hooks/exhaustive-deps

  // the window in the URL (replace: zooming does not fill the history)
  useEffect(() => {
    if (!vp || !bounds) return;
    const whole = vp.start <= bounds.start && vp.end >= bounds.end;
    const timer = setTimeout(() => {
      setState({ t0: whole ? undefined : String(Math.floor(vp.start)), t1: whole ? undefined : String(Math.ceil(vp.end)) }, true);
    }, 300);
    return () => clearTimeout(timer);
  }, [vp?.start, vp?.end, bounds]); // eslint-disable-line react-hooks/exhaustive-deps

  // Back/Forward or a link changed the window in the URL
  useEffect(() => {
    if (!vp || t0 === null || t1 === null) return;
    if (Math.abs(t0 - vp.start) > 1 || Math.abs(t1 - vp.end) > 1) setVp({ start: t0, end: t1, width: vp.width });
  }, [st.t0, st.t1]); // eslint-disable-line react-hooks/exhaustive-deps

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
  const counters = useMemo<Counter[]>(() => {
    const d = mem.data;
    if (!d || !showMem) return [];
    return d.devices
      .filter((dev) => (d.curves[dev] ?? []).length > 0)
      .map((dev) => ({
        name: `Memory allocated, ${dev}`,
        points: d.curves[dev].map((p) => [p.ts_ns, p.allocated] as [number, number | null]),
        format: (v: number) => fmtBytes(v),
      }));
  }, [mem.data, showMem]);

  const selected = st.ev && /^\d+$/.test(st.ev) ? Number(st.ev) : null;
  const details = useApi<EventDetailReply>(selected !== null ? "trace/event" : null, { ...sel, i: selected ?? undefined });

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

  const jump = (m: SearchMatch) => {
    setState({ ev: String(m.i) });
    if (vp && bounds && !isWellVisible(m.ts_ns, m.dur_ns, vp)) setVp(jumpWindow(m.ts_ns, m.dur_ns, vp.width, bounds));
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
  const utilCounters = useMemo<Counter[]>(() => {
    if (!showUtil || !data?.counters) return [];
    return data.counters.map((c) => ({
      name: c.name,
      kind: c.kind,
      max: c.kind === "utilization" ? 1 : undefined,
      points: binPoints(c.start_ns, c.end_ns, c.values),
      format: (v: number) => (c.kind === "utilization" ? `${(v * 100).toFixed(1)}%` : String(v)),
    }));
  }, [data?.counters, showUtil]);
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
        <span className="search-box" role="search" style={{ display: "inline-flex", alignItems: "center", gap: 4 }}>
          <input
            type="search"
            className="filter"
            placeholder="Search events by name…"
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
        <button type="button" className="small" onClick={() => setVp({ start: bounds.start, end: bounds.end, width: vp.width })}>
          Whole trace
        </button>
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
          onSelect={(i) => setState({ ev: i === null ? undefined : String(i) })}
          flows={flows}
          search={search}
          dark={dark}
          height={Math.max(360, Math.min(900, (typeof window !== "undefined" ? window.innerHeight : 800) - 190))}
          loading={loading}
          reveal={reveal}
          counters={allCounters}
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
      <div className="muted small-note">
        Ctrl/⌘ + wheel or W/S: zoom · drag, A/D or horizontal wheel: pan · wheel: scroll tracks · Shift + drag: zoom to a range ·
        click a track header to fold it · click a grey block to zoom into it · click an event for details. Times are from the trace's first event.
      </div>
    </div>
  );
}
