// The trace timeline: a canvas drawn by our own code from the server's window of
// events (docs/api.md, GET trace): tracks per process/thread/stream with a header
// strip and one row per nesting depth, events as boxes with their names, sub-pixel
// events as the server's merged "busy" blocks. Zoom (Ctrl/⌘/Alt + wheel, W/S, +/-),
// pan (drag, horizontal wheel, A/D, arrows), range zoom (Shift + drag), vertical
// scroll (wheel), click for details, hover for a tooltip, time-range selection (drag on
// the ruler: a band over every track, owned by the parent; Escape or a click on the
// ruler clears it). Names are drawn with
// fillText (their bidi controls as visible markers, util/bidi: canvasLabel, so that a
// U+202E cannot reverse a label) or shown as React text (components/Name): never HTML. Arrows (flows) are drawn from their
// endpoints' coordinates, so an end merged into a busy block or outside the window
// still gets its arrow; what was drawn is mirrored into data- attributes of the
// timeline's box (data-flows, data-counters, data-tracks, data-window-*, data-range-*,
// data-highlighted) for tests and tools. A highlight (the critical path of a step) outlines
// its events and draws its spans as a strip along the bottom of the ruler, by kind.

import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { BusyBlock, TimelineEvent, TimelineTrack } from "../api/types";
import { Name } from "../components/Name";
import { canvasLabel } from "../util/bidi";
import { fmtDuration } from "../util/format";
import { counterFill, nameColor, palette } from "./colors";
import { rangeEdge, rangeFromDrag, rangeLabel } from "./rangeSelect";
import {
  counterAt, fitRange, hitTest, layoutTracks, panBy, rowMiddle, spanToPx, tickLabel, ticks, timeToX, xToTime, zoomAt,
  type Range, type TrackBox, type Viewport,
} from "./coords";

export const RULER_H = 26;
export const ROW_H = 18;
export const HEADER_H = 18;
const GAP = 2;

export const COUNTER_H = 40;

/** A counter drawn as a step area above the tracks (device utilization, memory allocated). */
export interface Counter {
  name: string;
  /** [time ns, value] sorted by time; null = unknown */
  points: [number, number | null][];
  format: (v: number) => string;
  /** "utilization" | "memory": picks the fill */
  kind?: string;
  /** the value at the top of the track (default: the largest value shown) */
  max?: number;
}

/** One end of an arrow: an event's start on its track row. */
export interface FlowEnd {
  i: number;
  ts_ns: number;
  track: number;
  depth: number;
}

export interface FlowLink {
  from: FlowEnd;
  to: FlowEnd;
  /** launch, fwdbwd, operator (a kernel's issuing op: dashed), flow */
  kind?: string;
  /** drawn thin and pale: flows in view that do not touch the selection */
  faint?: boolean;
}

interface Props {
  tracks: TimelineTrack[];
  events: TimelineEvent[];
  busy: BusyBlock[];
  bounds: Range;
  vp: Viewport;
  onViewport: (vp: Viewport) => void;
  selected: number | null;
  onSelect: (i: number | null) => void;
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
}

/** A span of the highlight strip: kind device / device_gap (device color), sync, other, else host. */
export interface HighlightSpan {
  start: number;
  end: number;
  kind: string;
}

export const HIGHLIGHT_STRIP_H = 4;

/** The outline of highlighted events, and the strip's color per span kind; readable on light and dark. */
export function highlightColor(kind: string | null, dark: boolean): string {
  if (kind === "device" || kind === "device_gap") return dark ? "#7aa2ff" : "#3056c8";
  if (kind === "sync") return dark ? "#ff6b6b" : "#c5221f";
  if (kind === "other") return dark ? "#9aa0a6" : "#80868b";
  return dark ? "#ffa53d" : "#e8590c"; // the outline and the host kinds: orange
}

interface Hover {
  x: number;
  y: number;
  ev?: TimelineEvent;
  busy?: BusyBlock;
  counter?: { name: string; value: string; t: number };
}

export function Timeline(props: Props) {
  const { tracks, events, busy, bounds, vp, onViewport, selected, onSelect, flows, search, dark, height, loading, reveal, onSelectRange } = props;
  const selection = props.selection ?? null;
  const counters = props.counters ?? [];
  const highlight = props.highlight ?? null;
  const highlightSpans = props.highlightSpans ?? null;
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
  const drag = useRef<{ x: number; y: number; vp: Viewport; moved: boolean; shift: boolean; ruler: boolean; scrollY: number } | null>(null);
  const lastMouseX = useRef<number | null>(null);

  const view: Viewport = useMemo(() => ({ ...vp, width }), [vp, width]);
  const layout = useMemo(() => layoutTracks(tracks, ROW_H, HEADER_H, collapsed, GAP), [tracks, collapsed]);
  const boxById = useMemo(() => new Map(layout.boxes.map((b) => [b.id, b])), [layout]);
  // the track headers laid out, top to bottom, as JSON (mirrored for tests and tools)
  const trackLabels = useMemo(() => JSON.stringify(tracks.filter((t) => boxById.has(t.id)).map((t) => `${t.process} — ${t.thread}`)), [tracks, boxById]);
  const needle = search.trim().toLowerCase();
  const plotH = height - RULER_H;
  const maxScroll = Math.max(0, layout.height + countersH - plotH);

  useEffect(() => {
    if (scrollY > maxScroll) setScrollY(maxScroll);
  }, [maxScroll, scrollY]);

  useEffect(() => {
    if (!reveal) return;
    const b = layout.boxes.find((x) => x.id === reveal.track);
    if (!b) return;
    if (collapsed.has(reveal.track)) {
      setCollapsed((c) => {
        const n = new Set(c);
        n.delete(reveal.track);
        return n;
      });
    }
    const y = countersH + b.y + HEADER_H + reveal.depth * ROW_H;
    setScrollY((s) => (y < s || y + ROW_H > s + plotH ? Math.max(0, Math.min(y - plotH / 3, Math.max(0, layout.height + countersH - plotH))) : s));
  }, [reveal?.nonce, reveal?.track]); // eslint-disable-line react-hooks/exhaustive-deps

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
    const dpr = window.devicePixelRatio || 1;
    const W = width;
    const H = height;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
      c.width = Math.round(W * dpr);
      c.height = Math.round(H * dpr);
      c.style.width = `${W}px`;
      c.style.height = `${H}px`;
    }
    const ctx = c.getContext("2d");
    if (!ctx) return;
    const pal = palette(dark);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = pal.bg;
    ctx.fillRect(0, 0, W, H);
    ctx.font = "11px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
    ctx.textBaseline = "middle";
    ctx.direction = "ltr";
    const charW = Math.max(5, ctx.measureText("abcdefghijklmnopqrstuvwxyz_:").width / 28);
    const tk = ticks(view, 100);

    // tracks area (clipped below the ruler)
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, RULER_H, W, H - RULER_H);
    ctx.clip();
    const top = RULER_H + countersH - scrollY;

    // counters
    counters.forEach((cn, k) => {
      const y0 = RULER_H - scrollY + k * COUNTER_H;
      if (y0 > H || y0 + COUNTER_H < RULER_H) return;
      ctx.fillStyle = pal.header;
      ctx.fillRect(0, y0, W, COUNTER_H - 2);
      let max = cn.max ?? 0;
      if (cn.max === undefined) for (const [, v] of cn.points) if (v !== null && v > max) max = v;
      if (max > 0 && cn.points.length) {
        const base = y0 + COUNTER_H - 3;
        const scale = (COUNTER_H - 8) / max;
        ctx.beginPath();
        ctx.moveTo(Math.max(timeToX(cn.points[0][0], view), -1), base);
        let lastY = base;
        for (const [t, v] of cn.points) {
          const x = Math.min(Math.max(timeToX(t, view), -1), W + 1);
          ctx.lineTo(x, lastY);
          lastY = base - (v ?? 0) * scale;
          ctx.lineTo(x, lastY);
        }
        ctx.lineTo(W + 1, lastY);
        ctx.lineTo(W + 1, base);
        ctx.closePath();
        ctx.fillStyle = counterFill(cn.kind, dark);
        ctx.fill();
      }
      const label = canvasLabel(cn.max !== undefined ? cn.name : `${cn.name}${max > 0 ? ` (max ${cn.format(max)})` : ""}`, Math.max(2, Math.floor((W - 20) / charW)));
      ctx.globalAlpha = 0.8; // the label stays readable over the area
      ctx.fillStyle = pal.header;
      ctx.fillRect(2, y0 + 2, ctx.measureText(label).width + 8, 14);
      ctx.globalAlpha = 1;
      ctx.fillStyle = pal.headerText;
      ctx.fillText(label, 6, y0 + 9);
    });

    // grid lines
    ctx.strokeStyle = pal.grid;
    ctx.lineWidth = 1;
    for (const t of tk.times) {
      const x = Math.round(timeToX(t, view)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, RULER_H);
      ctx.lineTo(x, H);
      ctx.stroke();
    }

    // track headers
    for (const t of tracks) {
      const b = boxById.get(t.id);
      if (!b) continue;
      const y = top + b.y;
      if (y > H || y + b.height < RULER_H) continue;
      ctx.fillStyle = pal.header;
      ctx.fillRect(0, y, W, HEADER_H);
      ctx.fillStyle = pal.headerText;
      const label = `${collapsed.has(t.id) ? "▸" : "▾"} ${t.process} — ${t.thread}`;
      ctx.fillText(canvasLabel(label, Math.max(2, Math.floor(W / charW))), 6, y + HEADER_H / 2);
    }

    // busy blocks (merged sub-pixel events)
    ctx.fillStyle = pal.busy;
    for (const bb of busy) {
      const b = boxById.get(bb.track);
      if (!b || bb.depth >= b.rows) continue;
      const y = top + b.y + HEADER_H + bb.depth * ROW_H;
      if (y > H || y + ROW_H < RULER_H) continue;
      const px = spanToPx(bb.start_ns, bb.end_ns - bb.start_ns, view, 1);
      if (!px) continue;
      ctx.fillRect(px.x, y + 3, px.w, ROW_H - 6);
    }

    // events
    let selBox: { x: number; y: number; w: number } | null = null;
    const lit: { x: number; y: number; w: number }[] = [];
    let litCount = 0;
    for (const e of events) {
      const isLit = highlight !== null && highlight.has(e.i);
      if (isLit) litCount++;
      const b = boxById.get(e.track);
      if (!b || e.depth >= b.rows) continue;
      const y = top + b.y + HEADER_H + e.depth * ROW_H;
      if (y > H || y + ROW_H < RULER_H) continue;
      const px = spanToPx(e.ts_ns, e.dur_ns, view, 1);
      if (!px) continue;
      const match = needle !== "" && e.name.toLowerCase().includes(needle);
      ctx.globalAlpha = needle !== "" && !match ? 0.25 : 1;
      ctx.fillStyle = nameColor(e.name, dark);
      ctx.fillRect(px.x, y + 1, Math.max(px.w - (px.w > 3 ? 0.5 : 0), 1), ROW_H - 2);
      if (px.w > 24) {
        const vx = Math.max(px.x, 0);
        const vw = Math.min(px.x + px.w, W) - vx;
        const n = Math.floor((vw - 6) / charW);
        if (n >= 2) {
          ctx.fillStyle = dark ? "#f2f2f2" : "#1a1a1a";
          ctx.fillText(canvasLabel(e.name, n), vx + 3, y + ROW_H / 2);
        }
      }
      if (match) {
        ctx.strokeStyle = pal.select;
        ctx.lineWidth = 1;
        ctx.strokeRect(px.x + 0.5, y + 1.5, Math.max(px.w - 1, 1), ROW_H - 3);
      }
      if (e.i === selected) selBox = { x: px.x, y, w: px.w };
      if (isLit) lit.push({ x: px.x, y, w: px.w });
    }
    ctx.globalAlpha = 1;
    if (wrap.current) wrap.current.dataset.highlighted = highlight ? String(litCount) : "";

    // the highlighted events: a tint and a thick outline over their neighbours; a narrow one
    // (an outline would hide it and its neighbours) gets a bar along its top and bottom edges
    if (lit.length) {
      const color = highlightColor(null, dark);
      ctx.fillStyle = color;
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      for (const b of lit) {
        if (b.w >= 6) {
          ctx.globalAlpha = 0.22;
          ctx.fillRect(b.x, b.y + 1, b.w, ROW_H - 2);
          ctx.globalAlpha = 1;
          ctx.strokeRect(b.x - 0.5, b.y + 1, b.w + 1, ROW_H - 2);
        } else {
          ctx.fillRect(b.x, b.y, Math.max(b.w, 1), 3);
          ctx.fillRect(b.x, b.y + ROW_H - 3, Math.max(b.w, 1), 3);
        }
      }
    }

    // flows: the faint ones in view first, the selection's on top
    const drawn = drawFlows(ctx, flows, boxById, view, top, W, H, pal);
    if (wrap.current) wrap.current.dataset.flows = drawn.join(" ");

    if (selBox) {
      ctx.strokeStyle = pal.select;
      ctx.lineWidth = 2;
      ctx.strokeRect(selBox.x - 1, selBox.y, Math.max(selBox.w, 1) + 2, ROW_H);
    }

    // the selected time range (or the one being dragged on the ruler): a band over every track
    const band = pending ?? selection;
    const bandPx = band ? { x0: Math.max(-1, timeToX(band.start, view)), x1: Math.min(W + 1, timeToX(band.end, view)) } : null;
    if (bandPx && bandPx.x1 >= 0 && bandPx.x0 <= W) {
      ctx.fillStyle = pal.range;
      ctx.fillRect(bandPx.x0, RULER_H, Math.max(bandPx.x1 - bandPx.x0, 1), H - RULER_H);
      ctx.strokeStyle = rangeEdge(dark);
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (const x of [bandPx.x0, bandPx.x1]) {
        ctx.moveTo(Math.round(x) + 0.5, RULER_H);
        ctx.lineTo(Math.round(x) + 0.5, H);
      }
      ctx.stroke();
    }

    // range being selected
    if (range) {
      const x0 = Math.min(range.x0, range.x1);
      const x1 = Math.max(range.x0, range.x1);
      ctx.fillStyle = pal.range;
      ctx.fillRect(x0, RULER_H, x1 - x0, H - RULER_H);
    }
    ctx.restore();

    // ruler
    ctx.fillStyle = pal.ruler;
    ctx.fillRect(0, 0, W, RULER_H);
    ctx.strokeStyle = pal.grid;
    ctx.beginPath();
    ctx.moveTo(0, RULER_H - 0.5);
    ctx.lineTo(W, RULER_H - 0.5);
    ctx.stroke();
    ctx.fillStyle = pal.muted;
    for (const t of tk.times) {
      const x = Math.round(timeToX(t, view)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, RULER_H - 6);
      ctx.lineTo(x, RULER_H);
      ctx.strokeStyle = pal.muted;
      ctx.stroke();
      ctx.fillText(tickLabel(t, tk.step, tk.magnitude), x + 3, RULER_H / 2 - 2);
    }
    // the highlight's spans: a strip along the bottom of the ruler
    if (highlightSpans && highlightSpans.length) {
      const y = RULER_H - HIGHLIGHT_STRIP_H - 1;
      for (const sp of highlightSpans) {
        const px = spanToPx(sp.start, sp.end - sp.start, view, 1);
        if (!px) continue;
        ctx.fillStyle = highlightColor(sp.kind, dark);
        ctx.fillRect(px.x, y, px.w, HIGHLIGHT_STRIP_H);
      }
    }
    if (range) {
      const t0 = xToTime(Math.min(range.x0, range.x1), view);
      const t1 = xToTime(Math.max(range.x0, range.x1), view);
      ctx.fillStyle = pal.text;
      const label = fmtDuration(t1 - t0);
      ctx.fillText(label, Math.min(range.x0, range.x1) + 4, RULER_H - 8);
    }
    if (band && bandPx && bandPx.x1 >= 0 && bandPx.x0 <= W) {
      ctx.fillStyle = pal.range;
      ctx.fillRect(bandPx.x0, 0, Math.max(bandPx.x1 - bandPx.x0, 1), RULER_H);
      // the label: centred on the band, kept inside the canvas, over the tick labels
      const label = rangeLabel(band);
      const lw = ctx.measureText(label).width + 10;
      const lx = Math.max(1, Math.min(W - lw - 1, (Math.max(bandPx.x0, 0) + Math.min(bandPx.x1, W)) / 2 - lw / 2));
      ctx.fillStyle = pal.ruler;
      ctx.fillRect(lx, 3, lw, RULER_H - 8);
      ctx.strokeStyle = rangeEdge(dark);
      ctx.strokeRect(lx + 0.5, 3.5, lw - 1, RULER_H - 9);
      ctx.fillStyle = pal.text;
      ctx.fillText(label, lx + 5, 3 + (RULER_H - 8) / 2);
    }
    if (loading) {
      ctx.fillStyle = pal.select;
      ctx.fillRect(0, RULER_H - 2, W, 2);
    }
  }, [width, height, dark, view, tracks, events, busy, boxById, collapsed, scrollY, needle, selected, flows, range, pending, selection, loading, counters, countersH, highlight, highlightSpans]);

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
      onSelect(ev.i);
      return;
    }
    const bb = busyAt(p.x, p.y);
    if (bb) {
      onViewport(fitRange(bb.start_ns, bb.end_ns, width, bounds, 0.2));
      return;
    }
    onSelect(null);
  };

  const onKeyDown = (e: React.KeyboardEvent) => {
    const cx = lastMouseX.current ?? width / 2;
    const k = e.key.toLowerCase();
    let handled = true;
    if (k === "w" || k === "+" || k === "=") onViewport(zoomAt(view, 1.5, cx, bounds));
    else if (k === "s" || k === "-" || k === "_") onViewport(zoomAt(view, 1 / 1.5, cx, bounds));
    else if (k === "a" || k === "arrowleft") onViewport(panBy(view, width / 5, bounds));
    else if (k === "d" || k === "arrowright") onViewport(panBy(view, -width / 5, bounds));
    else if (k === "arrowup") setScrollY((s) => Math.max(0, s - 60));
    else if (k === "arrowdown") setScrollY((s) => Math.min(maxScroll, s + 60));
    else if (k === "0") onViewport({ start: bounds.start, end: bounds.end, width });
    else if (k === "escape") {
      if (selection && onSelectRange) onSelectRange(null);
      else onSelect(null);
    }
    else handled = false;
    if (handled) e.preventDefault();
  };

  return (
    <div
      className="timeline"
      ref={wrap}
      data-window-start={Math.floor(vp.start)}
      data-window-end={Math.ceil(vp.end)}
      data-selected={selected ?? ""}
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
        aria-label={`Trace timeline. W/S or Ctrl+wheel zoom, A/D or drag pan, Shift+drag zooms to a range, click an event for details.${onSelectRange ? " Drag on the time ruler to select a range, Escape clears it." : ""}`}
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
      {hover && (
        <div className="tl-tip" style={{ left: Math.min(hover.x + 12, width - 260), top: hover.y + 14 }}>
          {hover.ev ? (
            <>
              <div className="tl-tip-name"><Name text={hover.ev.name} /></div>
              <div className="muted">
                <Name text={hover.ev.cat} /> · {fmtDuration(hover.ev.dur_ns)} · at {fmtDuration(hover.ev.ts_ns)}
              </div>
            </>
          ) : hover.counter ? (
            <>
              <div className="tl-tip-name"><Name text={hover.counter.name} /></div>
              <div className="muted">
                {hover.counter.value} at {fmtDuration(hover.counter.t)}
              </div>
            </>
          ) : hover.busy ? (
            <>
              <div className="tl-tip-name">{hover.busy.count} events too small to draw</div>
              <div className="muted">{fmtDuration(hover.busy.end_ns - hover.busy.start_ns)} · click to zoom in</div>
            </>
          ) : null}
        </div>
      )}
    </div>
  );
}

/**
 * Draws the arrows (a curve from the start of `from` to the start of `to` with a head)
 * and returns "from>to" for each one drawn: both ends on a laid-out track and the
 * curve crossing the visible area.
 */
function drawFlows(
  ctx: CanvasRenderingContext2D,
  flows: readonly FlowLink[],
  boxById: ReadonlyMap<number, TrackBox>,
  view: Viewport,
  top: number,
  W: number,
  H: number,
  pal: ReturnType<typeof palette>,
): string[] {
  const drawn: string[] = [];
  const order = [...flows.filter((f) => f.faint), ...flows.filter((f) => !f.faint)];
  const clampX = (x: number) => Math.max(-W, Math.min(2 * W, x));
  for (const f of order) {
    const ba = boxById.get(f.from.track);
    const bz = boxById.get(f.to.track);
    if (!ba || !bz) continue;
    const x0 = clampX(timeToX(f.from.ts_ns, view));
    const x1 = clampX(timeToX(f.to.ts_ns, view));
    const y0 = top + rowMiddle(ba, f.from.depth, ROW_H, HEADER_H);
    const y1 = top + rowMiddle(bz, f.to.depth, ROW_H, HEADER_H);
    if ((x0 < 0 && x1 < 0) || (x0 > W && x1 > W) || (y0 < RULER_H && y1 < RULER_H) || (y0 > H && y1 > H)) continue;
    const color = f.faint ? pal.flowFaint : pal.flow;
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = f.faint ? 1 : 1.75;
    ctx.setLineDash(f.kind === "operator" ? [5, 3] : []);
    const bend = Math.min(40, Math.abs(x1 - x0) / 2 + 12);
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.bezierCurveTo(x0 + bend, y0, x1 - bend, y1, x1, y1);
    ctx.stroke();
    ctx.setLineDash([]);
    const head = f.faint ? 5 : 7; // the curve enters its end horizontally, from the left
    ctx.beginPath();
    ctx.moveTo(x1, y1);
    ctx.lineTo(x1 - head, y1 - head * 0.5);
    ctx.lineTo(x1 - head, y1 + head * 0.5);
    ctx.closePath();
    ctx.fill();
    if (!f.faint) {
      ctx.beginPath();
      ctx.arc(x0, y0, 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
    drawn.push(`${f.from.i}>${f.to.i}`);
  }
  return drawn;
}
