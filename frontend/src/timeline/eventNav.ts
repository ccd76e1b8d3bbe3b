// Moving the timeline's keyboard cursor from event to event: the next / previous event on
// the cursor's row, the event in the row above (its parent, on its own track) or below (its
// first child), and the window that shows where the cursor went. Among the events the window
// carries (those drawn at the current zoom; sub-pixel ones are merged into busy blocks and
// are not stepped through): a keypress never waits for the server. Pure functions, unit-tested.

import { clampViewport, type Range, type Viewport } from "./coords";

/** What the navigation needs of an event (TimelineEvent and the details' event both fit). */
export interface NavEvent {
  i: number;
  track: number;
  depth: number;
  ts_ns: number;
  dur_ns: number;
}

/** A row of the timeline: one nesting depth of one track, in the order they are drawn. */
export interface NavRow {
  track: number;
  depth: number;
}

export type NavDir = "next" | "prev" | "up" | "down";

/** Events of a row ordered by (start, i): two events of a row never overlap, zero-length ones may share a start. */
function before(a: NavEvent, b: NavEvent): boolean {
  return a.ts_ns < b.ts_ns || (a.ts_ns === b.ts_ns && a.i < b.i);
}

/** The event after (dir 1) or before (dir -1) `cur` on its own row, or null at the row's end. */
export function stepOnRow<T extends NavEvent>(events: readonly T[], cur: NavEvent, dir: 1 | -1): T | null {
  let best: T | null = null;
  for (const e of events) {
    if (e.track !== cur.track || e.depth !== cur.depth || e.i === cur.i) continue;
    if (dir > 0 ? !before(cur, e) : !before(e, cur)) continue;
    if (best === null || (dir > 0 ? before(e, best) : before(best, e))) best = e;
  }
  return best;
}

/**
 * The event of `row` nearest to `cur` in time: among those overlapping it the earliest
 * (its parent, or its first child), else the closest (gap between the two spans), the earlier
 * on a tie; null when the row has no event.
 */
export function nearestInRow<T extends NavEvent>(events: readonly T[], row: NavRow, cur: NavEvent): T | null {
  const a = cur.ts_ns;
  const b = cur.ts_ns + cur.dur_ns;
  let best: T | null = null;
  let bestGap = Infinity;
  for (const e of events) {
    if (e.track !== row.track || e.depth !== row.depth) continue;
    const ea = e.ts_ns;
    const eb = e.ts_ns + e.dur_ns;
    const gap = eb < a ? a - eb : ea > b ? ea - b : 0;
    if (gap < bestGap || (gap === bestGap && best !== null && before(e, best))) {
      best = e;
      bestGap = gap;
    }
  }
  return best;
}

/**
 * Where the cursor goes from `cur`: next / prev on its row; up / down to the nearest event of
 * the first row above / below that has one (`rows`: the drawn rows, top to bottom; a folded
 * track has none). Null: nothing that way among these events.
 */
export function navigate<T extends NavEvent>(events: readonly T[], rows: readonly NavRow[], cur: NavEvent, dir: NavDir): T | null {
  if (dir === "next" || dir === "prev") return stepOnRow(events, cur, dir === "next" ? 1 : -1);
  const k = rows.findIndex((r) => r.track === cur.track && r.depth === cur.depth);
  if (k < 0) return null;
  const d = dir === "up" ? -1 : 1;
  for (let j = k + d; j >= 0 && j < rows.length; j += d) {
    const hit = nearestInRow(events, rows[j], cur);
    if (hit) return hit;
  }
  return null;
}

/**
 * Where a cursor starts (no event picked yet): on the first row that has an event in the
 * window, its first event in view (one that began before the window counts when nothing
 * starts inside it).
 */
export function firstInView<T extends NavEvent>(events: readonly T[], rows: readonly NavRow[], vp: Range): T | null {
  for (const row of rows) {
    let best: T | null = null;
    for (const e of events) {
      if (e.track !== row.track || e.depth !== row.depth) continue;
      if (e.ts_ns + e.dur_ns < vp.start || e.ts_ns >= vp.end) continue;
      const inside = e.ts_ns >= vp.start;
      const bestInside = best !== null && best.ts_ns >= vp.start;
      if (best === null || (inside && !bestInside) || (inside === bestInside && before(e, best))) best = e;
    }
    if (best) return best;
  }
  return null;
}

/** Of a window's length, the margin kept between the cursor and the window's edge. */
const MARGIN = 0.05;

/**
 * The window that shows event `e`, panned as little as possible at the same zoom: unchanged
 * when `e` is in view; an event longer than the window is shown from its start unless part
 * of it is already in view (a long parent stays where it is).
 */
export function revealEvent(e: NavEvent, vp: Viewport, bounds: Range): Viewport {
  const span = vp.end - vp.start;
  const a = e.ts_ns;
  const b = e.ts_ns + e.dur_ns;
  if (a >= vp.start && b <= vp.end) return vp;
  let start: number;
  if (b - a > span * (1 - 2 * MARGIN)) {
    if (b > vp.start && a < vp.end) return vp;
    start = a - span * MARGIN;
  } else if (a < vp.start) start = a - span * MARGIN;
  else start = b + span * MARGIN - span;
  const out = clampViewport({ start, end: start + span, width: vp.width }, bounds);
  return out.start === vp.start && out.end === vp.end ? vp : out;
}

/**
 * With no event beyond the cursor among those the window carries, the window moved on to
 * the time not seen yet (the same zoom, a margin of the old window kept): the server then
 * sends the events there, for the next keypress. The row's next event starts no earlier
 * than the cursor's end (events of a row do not overlap), so a long cursor moves it further.
 * Null at the trace's edge.
 */
export function pastWindow(cur: NavEvent, vp: Viewport, bounds: Range, dir: 1 | -1): Viewport | null {
  const span = vp.end - vp.start;
  if (dir > 0 ? vp.end >= bounds.end : vp.start <= bounds.start) return null;
  const start = dir > 0 ? Math.max(vp.end, cur.ts_ns + cur.dur_ns) - span * MARGIN
    : Math.min(vp.start, cur.ts_ns) + span * MARGIN - span;
  return clampViewport({ start, end: start + span, width: vp.width }, bounds);
}
