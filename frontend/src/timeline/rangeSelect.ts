// The time range selected by a drag on the timeline's ruler (like Perfetto's area
// selection): pixels -> whole ns on the timeline's clock, inside the trace; its label.
// Pure functions, unit-tested without a canvas (views/trace/RangeStats.test.tsx).

import { fmtDuration } from "../util/format";
import { xToTime, type Range, type Viewport } from "./coords";

/**
 * The range between two x positions of the canvas (either order) as whole ns
 * (start floored, end ceiled), clamped to the trace; null when nothing is left.
 */
export function rangeFromDrag(x0: number, x1: number, vp: Viewport, bounds: Range): Range | null {
  const lo = Math.max(bounds.start, Math.floor(xToTime(Math.min(x0, x1), vp)));
  const hi = Math.min(bounds.end, Math.ceil(xToTime(Math.max(x0, x1), vp)));
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || hi <= lo) return null;
  return { start: lo, end: hi };
}

/** "1.2 ms – 3.4 ms (2.2 ms)": where the range starts and ends, and how long it is. */
export function rangeLabel(r: Range): string {
  return `${fmtDuration(r.start)} – ${fmtDuration(r.end)} (${fmtDuration(r.end - r.start)})`;
}

/** A range from the URL or elsewhere: whole non-negative ns, end after start; else null. */
export function parseRange(start: string | undefined | null, end: string | undefined | null): Range | null {
  if (!start || !end || !/^\d+$/.test(start) || !/^\d+$/.test(end)) return null;
  const a = Number(start);
  const b = Number(end);
  return Number.isSafeInteger(a) && Number.isSafeInteger(b) && b > a ? { start: a, end: b } : null;
}

/** The band's edge lines and its label's frame. */
export function rangeEdge(dark: boolean): string {
  return dark ? "rgba(120,170,255,0.95)" : "rgba(26,115,232,0.95)";
}
