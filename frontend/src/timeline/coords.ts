// Coordinate math of the timeline and the flame graph: time (ns, relative to the
// trace origin, as the API sends it) <-> canvas pixels, zoom around a point, pan,
// clamping to the trace, tick marks, track layout and hit testing. Pure functions,
// so they are unit-tested without a canvas.

import { axisUnit, niceStep, tickFormatter } from "../util/ticks";

export interface Viewport {
  /** first visible time, ns */
  start: number;
  /** end of the visible time, ns (exclusive) */
  end: number;
  /** canvas width in CSS pixels */
  width: number;
}

export interface Range {
  start: number;
  end: number;
}

/** The smallest visible duration (ns): 50 ns over the canvas. */
export const MIN_SPAN_NS = 50;

export function nsPerPx(vp: Viewport): number {
  return (vp.end - vp.start) / Math.max(1, vp.width);
}

export function timeToX(t: number, vp: Viewport): number {
  return ((t - vp.start) * vp.width) / (vp.end - vp.start);
}

export function xToTime(x: number, vp: Viewport): number {
  return vp.start + (x * (vp.end - vp.start)) / vp.width;
}

/** Keeps the window inside the trace and at least MIN_SPAN_NS wide. */
export function clampViewport(vp: Viewport, bounds: Range, minSpan = MIN_SPAN_NS): Viewport {
  const full = Math.max(bounds.end - bounds.start, minSpan);
  let dur = Math.min(Math.max(vp.end - vp.start, minSpan), full);
  if (!Number.isFinite(dur)) dur = full;
  let start = vp.start;
  if (!Number.isFinite(start)) start = bounds.start;
  if (start < bounds.start) start = bounds.start;
  if (start + dur > bounds.start + full) start = bounds.start + full - dur;
  return { start, end: start + dur, width: vp.width };
}

/**
 * Zooms by `factor` (>1 zooms in) keeping the time under pixel `x` in place, then
 * clamps to the trace.
 */
export function zoomAt(vp: Viewport, factor: number, x: number, bounds: Range, minSpan = MIN_SPAN_NS): Viewport {
  if (!(factor > 0)) return vp;
  const anchor = xToTime(x, vp);
  const full = Math.max(bounds.end - bounds.start, minSpan);
  const dur = Math.min(Math.max((vp.end - vp.start) / factor, minSpan), full);
  const frac = vp.width > 0 ? x / vp.width : 0.5;
  const start = anchor - frac * dur;
  return clampViewport({ start, end: start + dur, width: vp.width }, bounds, minSpan);
}

/** Moves the window by `dx` pixels (dragging right shows earlier time). */
export function panBy(vp: Viewport, dx: number, bounds: Range): Viewport {
  const dt = -dx * nsPerPx(vp);
  return clampViewport({ start: vp.start + dt, end: vp.end + dt, width: vp.width }, bounds);
}

/** A window showing [t0, t1) with a margin of `pad` of its length on each side. */
export function fitRange(t0: number, t1: number, width: number, bounds: Range, pad = 0.1): Viewport {
  const lo = Math.min(t0, t1);
  const hi = Math.max(t0, t1);
  const dur = Math.max(hi - lo, MIN_SPAN_NS);
  const m = dur * pad;
  return clampViewport({ start: lo - m, end: lo + dur + m, width }, bounds);
}

export { niceStep };

/** Tick times for the window, about `minPx` pixels apart, on nice values (util/ticks);
 * `magnitude` picks the one unit of the ruler's labels (tickLabel). */
export function ticks(vp: Viewport, minPx = 90): { step: number; times: number[]; magnitude: number } {
  const step = niceStep(nsPerPx(vp) * minPx, true);
  const first = Math.ceil(vp.start / step) * step;
  const times: number[] = [];
  for (let t = first; t < vp.end && times.length < 1000; t += step) {
    times.push(Math.round(t / step) * step);
  }
  return { step, times, magnitude: Math.max(Math.abs(vp.start), Math.abs(vp.end)) };
}

/** A tick label in the unit of the axis' magnitude (default: the tick's own), with the
 * decimals the step needs: "12.5 ms" (util/ticks, as every chart's axis). */
export function tickLabel(t: number, step: number, magnitude = Math.max(Math.abs(t), step)): string {
  return tickFormatter(axisUnit("duration", magnitude), step)(t);
}

/** Horizontal extent of an event on the canvas: clipped to it, at least `minW` wide. */
export function spanToPx(ts: number, dur: number, vp: Viewport, minW = 1): { x: number; w: number } | null {
  const x0 = timeToX(ts, vp);
  const x1 = timeToX(ts + dur, vp);
  if (x1 < 0 || x0 > vp.width) return null;
  const cx0 = Math.max(x0, -1);
  const cx1 = Math.min(x1, vp.width + 1);
  return { x: cx0, w: Math.max(cx1 - cx0, minW) };
}

export interface TrackLike {
  id: number;
  max_depth: number;
}

export interface TrackBox {
  id: number;
  /** top of the track's first row, px from the top of the content */
  y: number;
  height: number;
  rows: number;
}

/** Stacks tracks vertically: a header strip, then one row per nesting depth. */
export function layoutTracks(
  tracks: TrackLike[],
  rowH: number,
  headerH: number,
  collapsed: ReadonlySet<number> = new Set(),
  gap = 4,
): { boxes: TrackBox[]; height: number } {
  const boxes: TrackBox[] = [];
  let y = 0;
  for (const t of tracks) {
    const rows = collapsed.has(t.id) ? 0 : Math.max(1, (t.max_depth ?? 0) + 1);
    const height = headerH + rows * rowH;
    boxes.push({ id: t.id, y, height, rows });
    y += height + gap;
  }
  return { boxes, height: y };
}

export interface HitItem {
  track: number;
  depth: number;
  ts_ns: number;
  dur_ns: number;
}

/**
 * The item under (x, y) (content coordinates: y includes the scroll offset). Items
 * narrower than `slopPx` are hit within slopPx/2 of their middle; among several, the
 * one whose middle is nearest wins.
 */
export function hitTest<T extends HitItem>(
  items: readonly T[],
  boxes: readonly TrackBox[],
  x: number,
  y: number,
  vp: Viewport,
  rowH: number,
  headerH: number,
  slopPx = 3,
): T | null {
  const box = boxes.find((b) => y >= b.y && y < b.y + b.height);
  if (!box || box.rows === 0) return null;
  const rowY = y - box.y - headerH;
  if (rowY < 0) return null;
  const depth = Math.floor(rowY / rowH);
  let best: T | null = null;
  let bestDist = Infinity;
  for (const it of items) {
    if (it.track !== box.id || it.depth !== depth) continue;
    const x0 = timeToX(it.ts_ns, vp);
    const x1 = timeToX(it.ts_ns + it.dur_ns, vp);
    const mid = (x0 + x1) / 2;
    const half = Math.max((x1 - x0) / 2, slopPx / 2);
    const d = Math.abs(x - mid);
    if (d <= half) {
      const inside = x >= x0 && x <= x1;
      const score = inside ? 0 : d; // a real hit beats a slop hit
      if (score < bestDist || (score === bestDist && best && it.dur_ns < best.dur_ns)) {
        best = it;
        bestDist = score;
      }
    }
  }
  return best;
}

/** The last point at or before t (step semantics). */
export function counterAt(points: [number, number | null][], t: number): number | null {
  let lo = 0;
  let hi = points.length - 1;
  if (hi < 0 || points[0][0] > t) return null;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (points[mid][0] <= t) lo = mid;
    else hi = mid - 1;
  }
  return points[lo][1];
}

/** A binned counter (bin k covers [start + k*(end-start)/bins, ...)) as [bin start, value] points. */
export function binPoints(start: number, end: number, values: readonly number[]): [number, number][] {
  const n = values.length;
  const step = n > 0 ? (end - start) / n : 0;
  return values.map((v, k) => [start + k * step, v] as [number, number]);
}

/** The y (content px) of the middle of row `depth` of a track; of its header when folded. */
export function rowMiddle(box: TrackBox, depth: number, rowH: number, headerH: number): number {
  if (box.rows === 0) return box.y + headerH / 2;
  return box.y + headerH + Math.min(depth, box.rows - 1) * rowH + rowH / 2;
}

/** Whether [ts, ts + dur) lies inside the window and is at least `minPx` wide there. */
export function isWellVisible(ts: number, dur: number, vp: Viewport, minPx = 2): boolean {
  return ts >= vp.start && ts + dur <= vp.end && dur / nsPerPx(vp) >= minPx;
}

/** The window a jump to an event shows: the event as its middle third (at least 1 µs). */
export function jumpWindow(ts: number, dur: number, width: number, bounds: Range): Viewport {
  const d = Math.max(dur, 1000);
  const mid = ts + dur / 2;
  return clampViewport({ start: mid - 1.5 * d, end: mid + 1.5 * d, width }, bounds);
}
