// Drawing the timeline on its canvas, from what the Timeline component holds: counters,
// grid, track headers, busy blocks, events (search matches outlined, the selection and the
// keyboard cursor outlined), the highlight, arrows, the selected range's band, then the
// ruler (ticks, the steps' marks, the highlight strip, the band's label). Names go through
// canvasLabel (util/bidi): their bidi controls drawn as visible markers. Returns what was
// drawn for the box's data- attributes (tests and tools read them).

import type { BusyBlock, TimelineEvent, TimelineTrack } from "../api/types/trace";
import { canvasLabel } from "../util/bidi";
import { fmtDuration } from "../util/format";
import { counterFill, nameColor, palette } from "./colors";
import { rangeEdge, rangeLabel } from "./rangeSelect";
import { rowMiddle, spanToPx, tickLabel, ticks, timeToX, xToTime, type Range, type TrackBox, type Viewport } from "./coords";
import { COUNTER_H, HEADER_H, HIGHLIGHT_STRIP_H, ROW_H, RULER_H, highlightColor, type Counter, type FlowLink, type HighlightSpan } from "./model";
import { stepMarks, stepRangeLabel, type StepSpan } from "./steps";

/** Everything a frame shows. */
export interface DrawInput {
  width: number;
  height: number;
  dark: boolean;
  /** the window, at the canvas's width */
  view: Viewport;
  tracks: readonly TimelineTrack[];
  events: readonly TimelineEvent[];
  busy: readonly BusyBlock[];
  boxById: ReadonlyMap<number, TrackBox>;
  collapsed: ReadonlySet<number>;
  scrollY: number;
  /** the search, lower case ("" none) */
  needle: string;
  selected: number | null;
  /** the keyboard cursor's event (outlined dashed where it is not the selection) */
  cursor: number | null;
  flows: readonly FlowLink[];
  /** a Shift+drag being made (px) */
  range: { x0: number; x1: number } | null;
  /** the range being dragged on the ruler, else the selected one */
  band: Range | null;
  loading: boolean;
  counters: readonly Counter[];
  highlight: ReadonlySet<number> | null;
  highlightSpans: readonly HighlightSpan[] | null;
  steps: readonly StepSpan[] | null;
}

/** What was drawn: the arrows ("from>to") and how many highlighted events the window holds. */
export interface DrawOutput {
  flows: string[];
  lit: number;
}

export function drawTimeline(c: HTMLCanvasElement, s: DrawInput): DrawOutput | null {
  const { width, height, dark, view, tracks, events, busy, boxById, collapsed, scrollY, needle, selected, cursor, flows, range, band, loading, counters, highlight, highlightSpans, steps } = s;
  const countersH = counters.length * COUNTER_H;
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
  if (!ctx) return null;
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
  let curBox: { x: number; y: number; w: number } | null = null;
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
    else if (e.i === cursor) curBox = { x: px.x, y, w: px.w };
    if (isLit) lit.push({ x: px.x, y, w: px.w });
  }
  ctx.globalAlpha = 1;

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

  if (selBox) {
    ctx.strokeStyle = pal.select;
    ctx.lineWidth = 2;
    ctx.strokeRect(selBox.x - 1, selBox.y, Math.max(selBox.w, 1) + 2, ROW_H);
  }
  // the keyboard cursor (not yet opened with Enter): dashed, in the selection's color
  if (curBox) {
    ctx.strokeStyle = pal.select;
    ctx.lineWidth = 2;
    ctx.setLineDash([4, 3]);
    ctx.strokeRect(curBox.x - 1, curBox.y, Math.max(curBox.w, 1) + 2, ROW_H);
    ctx.setLineDash([]);
  }

  // where each step starts: a dashed line down the tracks (its label is on the ruler)
  const marks = steps && steps.length ? stepMarks(steps, view, (l) => ctx.measureText(l).width + 8) : [];
  ctx.strokeStyle = pal.muted;
  ctx.lineWidth = 1;
  ctx.setLineDash([2, 4]);
  ctx.beginPath();
  for (const m of marks) {
    if (m.pinned) continue;
    ctx.moveTo(Math.round(m.x) + 0.5, RULER_H);
    ctx.lineTo(Math.round(m.x) + 0.5, H);
  }
  ctx.stroke();
  ctx.setLineDash([]);

  // the selected time range (or the one being dragged on the ruler): a band over every track
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
  // the steps: a label boxed over the tick labels (like the band's) at each start in view, and
  // pinned at the left edge for the step holding it, so a deep zoom still says which step it is
  for (const m of marks) {
    if (!m.pinned) {
      ctx.fillStyle = pal.muted;
      ctx.fillRect(Math.round(m.x), 0, 1, RULER_H);
    }
    if (!m.label) continue;
    const lw = ctx.measureText(m.label).width + 8;
    const lx = m.pinned ? 1 : Math.round(m.x) + 2;
    ctx.fillStyle = pal.ruler;
    ctx.fillRect(lx, 3, lw, RULER_H - 9);
    ctx.fillStyle = pal.headerText;
    ctx.fillText(m.label, lx + 4, 3 + (RULER_H - 9) / 2);
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
    // the label (relative to the steps where both ends are in one): centred on the band,
    // kept inside the canvas, over the tick labels
    const rel = stepRangeLabel(band, steps);
    const label = rel ? `${rel} (${fmtDuration(band.end - band.start)})` : rangeLabel(band);
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
  return { flows: drawn, lit: litCount };
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
