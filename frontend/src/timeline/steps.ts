// Times relative to the training step that holds them ("step 17 +103.250 ms"), from the
// overview's steps (docs/api.md, GET overview: each step's [start_ns, end_ns) on the
// timeline's clock, stretched to the device work it launched), and exact starts
// ("12,345,678.123 µs"). A step is the unit people reason in ("step 17 is slow"), and the
// trace's own clock starts at an arbitrary first event. Pure functions, unit-tested.

import type { Range, Viewport } from "./coords";
import { timeToX } from "./coords";

/** One step on the timeline's clock: [start, end) in ns. */
export interface StepSpan {
  step: number;
  start: number;
  end: number;
}

/** The overview's steps as spans, in time order (the steps do not overlap: docs/api.md, Steps). */
export function stepSpans(steps: readonly { step: number; start_ns: number; end_ns: number }[]): StepSpan[] {
  return steps
    .filter((s) => Number.isFinite(s.start_ns) && Number.isFinite(s.end_ns) && s.end_ns > s.start_ns)
    .map((s) => ({ step: s.step, start: s.start_ns, end: s.end_ns }))
    .sort((a, b) => a.start - b.start);
}

/**
 * The step holding time t: start <= t < end; with `closedEnd`, start < t <= end instead
 * (the end of a range that stops where its step ends belongs to that step, not the next).
 */
export function stepAt(steps: readonly StepSpan[], t: number, closedEnd = false): StepSpan | null {
  let lo = 0;
  let hi = steps.length - 1;
  // the last step starting at (closedEnd: before) t
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (closedEnd ? steps[mid].start < t : steps[mid].start <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (found < 0) return null;
  const s = steps[found];
  return (closedEnd ? t <= s.end : t < s.end) ? s : null;
}

const UNITS: [number, string, number][] = [
  // [ns per unit, name, decimals that are whole ns]
  [1e9, "s", 9],
  [1e6, "ms", 6],
  [1e3, "µs", 3],
  [1, "ns", 0],
];

function unitOf(a: number): [number, string, number] {
  return UNITS.find(([f]) => a >= f) ?? UNITS[UNITS.length - 1];
}

/** "1,234,567": an integer's digits grouped by thousands. */
function group(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/**
 * |ns| in a unit with `decimals` decimals, from the integer's digits (no float division:
 * 103250123 ns is "103.250123" ms, never 103.25012299999999).
 */
function shifted(absNs: number, places: number, decimals: number): string {
  const digits = String(absNs).padStart(places + 1, "0");
  const int = digits.slice(0, digits.length - places) || "0";
  const frac = digits.slice(digits.length - places);
  return decimals > 0 ? `${int}.${frac.slice(0, decimals).padEnd(decimals, "0")}` : int;
}

/**
 * An offset with its sign and unit: "+103.250 ms", "-2.000 µs", "+0 ns". 3 decimals; `exact`
 * keeps every whole ns (trailing zeros past the third dropped: "+103.250123 ms"), so the text
 * is the offset itself, not a rounding of it. `compact` leaves out the space ("+1.5ms", the
 * typed range's form).
 */
export function fmtOffset(ns: number, exact = false, compact = false): string {
  const sign = ns < 0 ? "-" : "+";
  const a = Math.abs(exact && Number.isInteger(ns) ? ns : Math.round(ns));
  const [f, unit, places] = unitOf(a);
  let text: string;
  if (!Number.isSafeInteger(a)) text = String(a / f);
  else if (exact) {
    text = shifted(a, places, places);
    if (places > 3) text = text.replace(/0+$/, "").replace(/\.(\d{0,2})$/, (_, d: string) => `.${d.padEnd(3, "0")}`);
  } else {
    // 3 decimals of the unit, rounded half up on the whole ns
    const r = places > 3 ? Math.round(a / 10 ** (places - 3)) * 10 ** (places - 3) : a;
    const [, u2, p2] = unitOf(r); // 999.9996 µs rounds up to 1.000 ms
    text = shifted(r, p2, Math.min(3, p2));
    return `${sign}${text}${compact ? "" : " "}${u2}`;
  }
  return `${sign}${text}${compact ? "" : " "}${unit}`;
}

/** "step 17 +103.250 ms" for time t (exact: every ns), or null outside every step. */
export function fmtStepTime(t: number, steps: readonly StepSpan[] | null | undefined, exact = false, closedEnd = false): string | null {
  if (!steps || !steps.length || !Number.isFinite(t)) return null;
  const s = stepAt(steps, t, closedEnd);
  return s ? `step ${s.step} ${fmtOffset(t - s.start, exact)}` : null;
}

/**
 * A time as µs from the trace start with every ns the data has: "12,345,678.123 µs"
 * (the trace's own unit is the µs, with ns as its decimals).
 */
export function fmtExactUs(ns: number): string {
  if (!Number.isFinite(ns)) return "–";
  if (!Number.isSafeInteger(ns)) {
    return `${(ns / 1e3).toLocaleString("en-US", { maximumFractionDigits: 6 })} µs`;
  }
  const sign = ns < 0 ? "-" : "";
  const [int, frac] = shifted(Math.abs(ns), 3, 3).split(".");
  return `${sign}${group(int)}.${frac} µs`;
}

/**
 * A range relative to its steps: "step 17 +1.000 ms – +3.500 ms" in one step, "step 17
 * +150.000 ms – step 18 +2.000 ms" across two; null where an end is outside every step.
 */
export function stepRangeLabel(r: Range, steps: readonly StepSpan[] | null | undefined): string | null {
  if (!steps || !steps.length) return null;
  const a = stepAt(steps, r.start);
  const b = stepAt(steps, r.end, true);
  if (!a || !b) return null;
  const end = fmtOffset(r.end - b.start);
  return a === b ? `step ${a.step} ${fmtOffset(r.start - a.start)} – ${end}` : `step ${a.step} ${fmtOffset(r.start - a.start)} – step ${b.step} ${end}`;
}

/** Where the ruler marks a step: its start's x (px), or a label pinned at the left edge (`pinned`). */
export interface StepMark {
  step: number;
  x: number;
  label: string;
  pinned: boolean;
}

/**
 * The steps' marks on the ruler of window vp: a mark at each step start in view, and the step
 * holding the window's left edge pinned at x 0 (zoomed into a step, no start is in view: the
 * pinned label still says which step it is). A label is left out (x kept, label "") where it
 * would run into the next mark (`labelPx`: a label's width); at most 500 marks.
 */
export function stepMarks(steps: readonly StepSpan[], vp: Viewport, labelPx: (label: string) => number): StepMark[] {
  const out: StepMark[] = [];
  const first = stepAt(steps, vp.start);
  if (first && first.start < vp.start) out.push({ step: first.step, x: 0, label: `step ${first.step}`, pinned: true });
  for (const s of steps) {
    if (s.start < vp.start) continue;
    if (s.start >= vp.end || out.length >= 500) break;
    out.push({ step: s.step, x: timeToX(s.start, vp), label: `step ${s.step}`, pinned: false });
  }
  for (let k = 0; k < out.length; k++) {
    const room = (k + 1 < out.length ? out[k + 1].x : vp.width) - out[k].x;
    if (labelPx(out[k].label) + 6 > room) out[k] = { ...out[k], label: "" };
  }
  return out;
}
