// The trace timeline: a canvas drawn by our own code from the server's window of
// events (docs/api.md, GET trace): tracks per process/thread/stream with a header
// strip and one row per nesting depth, events as boxes with their names, sub-pixel
// events as the server's merged "busy" blocks (drawing: timeline/draw). Zoom (Ctrl/⌘/Alt
// + wheel, W/S, +/-), pan (drag, horizontal wheel, A/D, arrows), range zoom (Shift + drag),
// vertical scroll (wheel), click for details, hover for a tooltip (timeline/Tooltip),
// time-range selection (drag on the ruler: a band over every track, owned by the parent;
// Escape or a click on the ruler clears it), and a keyboard cursor over the events
// (timeline/keys, timeline/eventNav: ] / [ next / previous on the row, Shift+arrows the
// same and up / down, Enter its details, Escape clears the range, then the details, then
// the cursor). Steps (the owner's, timeline/steps) are marked on the ruler and give every
// time shown a step-relative form. Names are drawn with fillText (their bidi controls as
// visible markers, util/bidi: canvasLabel, so that a U+202E cannot reverse a label) or
// shown as React text (components/Name): never HTML. Arrows (flows) are drawn from their
// endpoints' coordinates, so an end merged into a busy block or outside the window
// still gets its arrow; what was drawn is mirrored into data- attributes of the
// timeline's box (data-flows, data-counters, data-tracks, data-window-*, data-range-*,
// data-highlighted, data-selected, data-cursor) for tests and tools. A highlight (the
// critical path of a step) outlines its events and draws its spans as a strip along the
// bottom of the ruler, by kind.

import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { BusyBlock, TimelineEvent, TimelineTrack } from "../api/types/trace";
import { fmtDuration } from "../util/format";
import { rangeFromDrag } from "./rangeSelect";
import { counterAt, fitRange, hitTest, layoutTracks, panBy, xToTime, zoomAt, type Range, type Viewport } from "./coords";
import { drawTimeline } from "./draw";
import { firstInView, navigate, pastWindow, revealEvent, type NavDir, type NavEvent, type NavRow } from "./eventNav";
import { escapeTarget, keyAction } from "./keys";
import { COUNTER_H, GAP, HEADER_H, ROW_H, RULER_H, type Counter, type FlowLink, type HighlightSpan } from "./model";
import { fmtStepTime, type StepSpan } from "./steps";
import { TimelineTip, type Hover } from "./Tooltip";

export { COUNTER_H, HEADER_H, HIGHLIGHT_STRIP_H, ROW_H, RULER_H, highlightColor } from "./model";
export type { Counter, FlowEnd, FlowLink, HighlightSpan } from "./model";

/** The keyboard cursor's event: where the cursor keys move from (its name for screen readers). */
export type CursorEvent = NavEvent & { name?: string };

interface Props {
  tracks: TimelineTrack[];
  events: TimelineEvent[];
  busy: BusyBlock[];
  bounds: Range;
  vp: Viewport;
  onViewport: (vp: Viewport) => void;
  selected: number | null;
  /** byKey: chosen with the cursor keys (the owner may replace its history entry, not add one) */
  onSelect: (i: number | null, byKey?: boolean) => void;
  flows: FlowLink[];
  search: string;
  dark: boolean;
  height: number;
  loading: boolean;
  /** scroll so this track row is visible (nonce: ask again for the same row) */
  reveal?: { track: number; depth: number; nonce: number } | null;
  counters?: Counter[];
  /** the selected time range (whole ns), drawn as a band over every track */
  selection?: Range | null;
  /** a drag on the ruler selects a range; a click on it or Escape clears it (null) */
  onSelectRange?: (r: Range | null) => void;
  /** events (their `i`) drawn with an outline over them (the critical path's) */
  highlight?: ReadonlySet<number> | null;
  /** time spans drawn as a strip along the bottom of the ruler, colored by kind (highlightColor) */
  highlightSpans?: readonly HighlightSpan[] | null;
  /** the trace's steps: marked on the ruler, and the tooltip's and the band's times relative to them */
  steps?: readonly StepSpan[] | null;
  /** the selected event's row and times (its details), for a selection the window does not carry */
  anchor?: CursorEvent | null;
}

function toCursor(e: CursorEvent): CursorEvent {
  return { i: e.i, track: e.track, depth: e.depth, ts_ns: e.ts_ns, dur_ns: e.dur_ns, name: e.name };
}

export function Timeline(props: Props) {
  const { tracks, events, busy, bounds, vp, onViewport, selected, onSelect, flows, search, dark, height, loading, reveal, onSelectRange } = props;
  const selection = props.selection ?? null;
  const counters = props.counters ?? [];
  const highlight = props.highlight ?? null;
  const highlightSpans = props.highlightSpans ?? null;
  const steps = props.steps ?? null;
  const anchor = props.anchor ?? null;
  const countersH = counters.length * COUNTER_H;
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(800);
  const [scrollY, setScrollY] = useState(0);
  const [collapsed, setCollapsed] = useState<Set<number>>(new Set());
  const [hover, setHover] = useState<Hover | null>(null);
  const [range, setRange] = useState<{ x0: number; x1: number } | null>(null);
  // a range being dragged on the ruler (committed through onSelectRange on release)
  const [pending, setPending] = useState<Range | null>(null);
  const [overRuler, setOverRuler] = useState(false);
  // the keyboard cursor, and what a screen reader is told when it moves
  const [cursor, setCursor] = useState<CursorEvent | null>(null);
  const [said, setSaid] = useState("");
  const drag = useRef<{ x: number; y: number; vp: Viewport; moved: boolean; shift: boolean; ruler: boolean; scrollY: number } | null>(null);
  const lastMouseX = useRef<number | null>(null);

  const view: Viewport = useMemo(() => ({ ...vp, width }), [vp, width]);
  const layout = useMemo(() => layoutTracks(tracks, ROW_H, HEADER_H, collapsed, GAP), [tracks, collapsed]);
  const boxById = useMemo(() => new Map(layout.boxes.map((b) => [b.id, b])), [layout]);
  // the drawn rows, top to bottom: where the cursor's up / down go
  const rows = useMemo<NavRow[]>(() => layout.boxes.flatMap((b) => Array.from({ length: b.rows }, (_, depth) => ({ track: b.id, depth }))), [layout]);
  // the track headers laid out, top to bottom, as JSON (mirrored for tests and tools)
  const trackLabels = useMemo(() => JSON.stringify(tracks.filter((t) => boxById.has(t.id)).map((t) => `${t.process} — ${t.thread}`)), [tracks, boxById]);
  const needle = search.trim().toLowerCase();
  const plotH = height - RULER_H;
  const maxScroll = Math.max(0, layout.height + countersH - plotH);

  useEffect(() => {
    if (scrollY > maxScroll) setScrollY(maxScroll);
  }, [maxScroll, scrollY]);

  /** Scrolls (and unfolds) so that a track's row is visible. */
  const revealRow = (track: number, depth: number) => {
    const b = layout.boxes.find((x) => x.id === track);
    if (!b) return;
    if (collapsed.has(track)) {
      setCollapsed((c) => {
        const n = new Set(c);
        n.delete(track);
        return n;
      });
    }
    const y = countersH + b.y + HEADER_H + depth * ROW_H;
    setScrollY((s) => (y < s || y + ROW_H > s + plotH ? Math.max(0, Math.min(y - plotH / 3, Math.max(0, layout.height + countersH - plotH))) : s));
  };

  useEffect(() => {
    if (reveal) revealRow(reveal.track, reveal.depth);
  }, [reveal?.nonce, reveal?.track]); // eslint-disable-line react-hooks/exhaustive-deps

  // the cursor is on the selection (a click, a search match, a linked event picked in the details)
  useEffect(() => {
    if (selected === null) return;
    const e = events.find((x) => x.i === selected) ?? (anchor && anchor.i === selected ? anchor : null);
    if (e) setCursor(toCursor(e));
  }, [selected, anchor]); // eslint-disable-line react-hooks/exhaustive-deps

  // keep the canvas as wide as its box
  useEffect(() => {
    if (!wrap.current) return;
    const ro = new ResizeObserver((entries) => {
      const w = Math.max(100, Math.floor(entries[0].contentRect.width));
      setWidth(w);
    });
    ro.observe(wrap.current);
    return () => ro.disconnect();
  }, []);

  // report the real width to the owner (it asks the server for that many pixels)
  useEffect(() => {
    if (vp.width !== width) onViewport({ ...vp, width });
  }, [width]); // eslint-disable-line react-hooks/exhaustive-deps

  const draw = useCallback(() => {
    const c = canvas.current;
    if (!c) return;
    const out = drawTimeline(c, {
      width, height, dark, view, tracks, events, busy, boxById, collapsed, scrollY, needle, selected, cursor: cursor?.i ?? null,
      flows, range, band: pending ?? selection, loading, counters, highlight, highlightSpans, steps,
    });
    if (out && wrap.current) {
      wrap.current.dataset.flows = out.flows.join(" ");
      wrap.current.dataset.highlighted = highlight ? String(out.lit) : "";
    }
  }, [width, height, dark, view, tracks, events, busy, boxById, collapsed, scrollY, needle, selected, cursor, flows, range, pending, selection, loading, counters, highlight, highlightSpans, steps]);

  useEffect(() => {
    const id = requestAnimationFrame(draw);
    return () => cancelAnimationFrame(id);
  }, [draw]);

  // ---- interaction ----------------------------------------------------------
  const local = (e: { clientX: number; clientY: number }) => {
    const r = canvas.current!.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  };

  const contentY = (y: number) => y - RULER_H - countersH + scrollY;

  const counterAtPointer = (x: number, y: number): Hover["counter"] | null => {
    const cy = y - RULER_H + scrollY;
    if (y < RULER_H || cy < 0 || cy >= countersH) return null;
    const cn = counters[Math.floor(cy / COUNTER_H)];
    if (!cn) return null;
    const t = xToTime(x, view);
    const v = counterAt(cn.points, t);
    return { name: cn.name, value: v === null ? "–" : cn.format(v), t };
  };

  const trackHeaderAt = (y: number): number | null => {
    if (y < RULER_H) return null;
    const cy = contentY(y);
    const b = layout.boxes.find((bx) => cy >= bx.y && cy < bx.y + HEADER_H);
    return b ? b.id : null;
  };

  const busyAt = (x: number, y: number): BusyBlock | null => {
    const cy = contentY(y);
    const b = layout.boxes.find((bx) => cy >= bx.y && cy < bx.y + bx.height);
    if (!b) return null;
    const depth = Math.floor((cy - b.y - HEADER_H) / ROW_H);
    if (depth < 0) return null;
    const t = xToTime(x, view);
    const slop = 2 * (view.end - view.start) / view.width;
    return busy.find((bb) => bb.track === b.id && bb.depth === depth && t >= bb.start_ns - slop && t <= bb.end_ns + slop) ?? null;
  };

  useEffect(() => {
    const c = canvas.current;
    if (!c) return;
    const onWheel = (e: WheelEvent) => {
      e.preventDefault();
      const { x } = local(e);
      const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
      const dx = e.deltaX * unit;
      const dy = e.deltaY * unit;
      if (e.ctrlKey || e.metaKey || e.altKey) {
        onViewport(zoomAt(view, Math.exp(-dy * 0.0025), x, bounds));
      } else if (e.shiftKey) {
        onViewport(panBy(view, -dy, bounds));
      } else if (Math.abs(dx) > Math.abs(dy)) {
        onViewport(panBy(view, -dx, bounds));
      } else {
        setScrollY((s) => Math.min(Math.max(0, s + dy), maxScroll));
      }
    };
    c.addEventListener("wheel", onWheel, { passive: false });
    return () => c.removeEventListener("wheel", onWheel);
  }, [view, bounds, onViewport, maxScroll]);

  const onMouseDown = (e: React.MouseEvent) => {
    if (e.button !== 0) return;
    const p = local(e);
    drag.current = { x: p.x, y: p.y, vp: view, moved: false, shift: e.shiftKey, ruler: !!onSelectRange && p.y < RULER_H, scrollY };
    canvas.current?.focus();
  };

  const onMouseMove = (e: React.MouseEvent) => {
    const p = local(e);
    lastMouseX.current = p.x;
    const d = drag.current;
    if (d && (e.buttons & 1) === 1) {
      if (Math.abs(p.x - d.x) > 3 || Math.abs(p.y - d.y) > 3) d.moved = true;
      if (!d.moved) return;
      setHover(null);
      if (d.ruler) {
        setPending(rangeFromDrag(d.x, p.x, view, bounds));
      } else if (d.shift) {
        setRange({ x0: d.x, x1: p.x });
      } else {
        onViewport(panBy(d.vp, p.x - d.x, bounds));
        setScrollY(Math.min(Math.max(0, d.scrollY - (p.y - d.y)), maxScroll));
      }
      return;
    }
    setOverRuler(p.y < RULER_H);
    if (p.y < RULER_H) {
      setHover(null);
      return;
    }
    const cnt = counterAtPointer(p.x, p.y);
    if (cnt) {
      setHover({ x: p.x, y: p.y, counter: cnt });
      return;
    }
    const ev = hitTest(events, layout.boxes, p.x, contentY(p.y), view, ROW_H, HEADER_H);
    if (ev) setHover({ x: p.x, y: p.y, ev });
    else {
      const bb = busyAt(p.x, p.y);
      setHover(bb ? { x: p.x, y: p.y, busy: bb } : null);
    }
  };

  const onMouseUp = (e: React.MouseEvent) => {
    const d = drag.current;
    drag.current = null;
    if (!d) return;
    const p = local(e);
    if (d.ruler) {
      // a drag selects the range under it, a click clears the selection
      setPending(null);
      onSelectRange?.(d.moved ? rangeFromDrag(d.x, p.x, view, bounds) : null);
      return;
    }
    if (d.shift && range) {
      const t0 = xToTime(Math.min(range.x0, range.x1), view);
      const t1 = xToTime(Math.max(range.x0, range.x1), view);
      setRange(null);
      if (Math.abs(range.x1 - range.x0) > 4) onViewport(fitRange(t0, t1, width, bounds, 0));
      return;
    }
    if (d.moved) return;
    const tid = trackHeaderAt(p.y);
    if (tid !== null) {
      setCollapsed((s) => {
        const n = new Set(s);
        if (n.has(tid)) n.delete(tid);
        else n.add(tid);
        return n;
      });
      return;
    }
    const ev = hitTest(events, layout.boxes, p.x, contentY(p.y), view, ROW_H, HEADER_H);
    if (ev) {
      setCursor(toCursor(ev));
      onSelect(ev.i);
      return;
    }
    const bb = busyAt(p.x, p.y);
    if (bb) {
      onViewport(fitRange(bb.start_ns, bb.end_ns, width, bounds, 0.2));
      return;
    }
    setCursor(null);
    onSelect(null);
  };

  /** Moves the keyboard cursor (the details follow it while they are open) and shows where it went. */
  const moveCursor = (dir: NavDir) => {
    const next = cursor ? navigate(events, rows, cursor, dir) : firstInView(events, rows, view);
    if (!next) {
      // nothing that way among the window's events: move on, the next window may hold one
      const w = cursor && (dir === "next" || dir === "prev") ? pastWindow(cursor, view, bounds, dir === "next" ? 1 : -1) : null;
      if (w) onViewport(w);
      return;
    }
    setCursor(toCursor(next));
    setSaid(`${next.name}, ${fmtDuration(next.dur_ns)}, ${fmtStepTime(next.ts_ns, steps) ?? `at ${fmtDuration(next.ts_ns)}`}`);
    if (selected !== null) onSelect(next.i, true);
    const w = revealEvent(next, view, bounds);
    if (w !== view) onViewport(w);
    revealRow(next.track, next.depth);
  };

  const onKeyDown = (e: React.KeyboardEvent) => {
    const a = keyAction(e);
    if (!a) return;
    e.preventDefault();
    const cx = lastMouseX.current ?? width / 2;
    if (a.kind === "zoom") onViewport(zoomAt(view, a.factor, cx, bounds));
    else if (a.kind === "pan") onViewport(panBy(view, width * a.frac, bounds));
    else if (a.kind === "scroll") setScrollY((s) => Math.min(maxScroll, Math.max(0, s + a.dy)));
    else if (a.kind === "whole") onViewport({ start: bounds.start, end: bounds.end, width });
    else if (a.kind === "cursor") moveCursor(a.dir);
    else if (a.kind === "open") {
      if (cursor && cursor.i !== selected) onSelect(cursor.i);
    } else {
      const what = escapeTarget(!!selection && !!onSelectRange, selected !== null, cursor !== null);
      if (what === "range") onSelectRange?.(null);
      else if (what === "selection") onSelect(null);
      else if (what === "cursor") setCursor(null);
    }
  };

  return (
    <div
      className="timeline"
      ref={wrap}
      data-window-start={Math.floor(vp.start)}
      data-window-end={Math.ceil(vp.end)}
      data-selected={selected ?? ""}
      data-cursor={cursor?.i ?? ""}
      data-counters={counters.map((c) => c.name).join("|")}
      data-tracks={trackLabels}
      data-range-start={selection ? selection.start : ""}
      data-range-end={selection ? selection.end : ""}
      data-highlight-total={highlight ? highlight.size : ""}
    >
      <canvas
        ref={canvas}
        tabIndex={0}
        className="timeline-canvas"
        aria-label={`Trace timeline. W/S or Ctrl+wheel zoom, A/D or drag pan, Shift+drag zooms to a range, click an event for details. ] and [ (or Shift+arrows) move a cursor over the events, Enter shows its details.${onSelectRange ? " Drag on the time ruler to select a range, Escape clears it." : ""}`}
        onMouseDown={onMouseDown}
        onMouseMove={onMouseMove}
        onMouseUp={onMouseUp}
        onMouseLeave={() => {
          setHover(null);
          setOverRuler(false);
          // a range dragged on the ruler out of the canvas keeps what was selected so far
          if (drag.current?.ruler && pending) onSelectRange?.(pending);
          setPending(null);
          drag.current = null;
          setRange(null);
        }}
        onKeyDown={onKeyDown}
        style={{ cursor: drag.current?.ruler || (overRuler && onSelectRange) ? "col-resize" : drag.current?.moved ? "grabbing" : hover && !hover.counter ? "pointer" : "default" }}
      />
      <div className="tl-live" aria-live="polite">{said}</div>
      {maxScroll > 0 && (
        <div className="vscroll" style={{ top: RULER_H, height: plotH }}>
          <div
            className="vscroll-thumb"
            style={{
              top: (scrollY / (layout.height + countersH || 1)) * plotH,
              height: Math.max(20, (plotH / (layout.height + countersH || 1)) * plotH),
            }}
          />
        </div>
      )}
      {hover && <TimelineTip hover={hover} width={width} steps={steps} />}
    </div>
  );
}
