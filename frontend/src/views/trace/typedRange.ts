// A time range typed into the Trace view's range box, and the box's text for a range
// selected otherwise (a drag on the ruler, the URL). Grammar (case-insensitive, spaces free):
//
//   range  := step | steps | step offsets | times
//   step   := "step" ["#"] INT                      the whole step: [its start, its end)
//   steps  := step ".." ["step"] ["#"] INT          from the first step's start to the last one's end
//   offsets:= time SEP time                          after `step`: from the step's start (may be negative)
//   times  := time SEP time                          from the trace start (never negative)
//   time   := ["+" | "-"] NUMBER [UNIT]             NUMBER: 12, 12.5, .5, 1,234.5 (thousands commas)
//   UNIT   := ns | us | µs | ms | s                  one side without a unit takes the other's
//   SEP    := ".." | "…" | "–" | "—"
//
// "step 17 +100ms..+110ms", "step 17", "step 3..5", "100ms..110ms", "1234.5us..2000us".
// Decimal text is turned into ns exactly (no float: 0.1 ms is 100000 ns, not 100000.00000000001),
// the start floored and the end ceiled to whole ns (the range covers what was typed), then
// clamped to the trace. "From the trace start" is the timeline's clock itself (0: the trace's
// first event), as every time the view shows. A bad input gives a short reason, never an exception.

import type { Range } from "../../timeline/coords";
import { fmtDuration } from "../../util/format";
import { fmtOffset, stepAt, type StepSpan } from "../../timeline/steps";

export type TypedRange = { ok: true; range: Range } | { ok: false; error: string };

const UNIT_EXP: Record<string, number> = { ns: 0, us: 3, "µs": 3, ms: 6, s: 9 };
const UNIT_WORDS = "ns, us, µs, ms or s";
const NUMBER = /^(\d{1,3}(?:,\d{3})+|\d+)?(?:\.(\d*))?$/;
const TIME = /^([+-]?)\s*([\d.,]+)\s*([a-zµ]*)$/;

interface Time {
  neg: boolean;
  signed: boolean;
  int: string;
  frac: string;
  unit: string | null;
}

function fail(error: string): TypedRange {
  return { ok: false, error };
}

/** One time's parts, or why it is not one. */
function parseTime(text: string): Time | string {
  const m = TIME.exec(text.trim());
  if (!m) return `"${clip(text.trim())}" is not a time (e.g. +100ms)`;
  const [, sign, num, unitRaw] = m;
  const n = NUMBER.exec(num);
  if (!n || (n[1] === undefined && !n[2])) return `"${clip(num)}" is not a number`;
  const unit = unitRaw === "" ? null : unitRaw;
  if (unit !== null && !(unit in UNIT_EXP)) return `unknown unit "${clip(unitRaw)}": use ${UNIT_WORDS}`;
  return { neg: sign === "-", signed: sign !== "", int: (n[1] ?? "0").replace(/,/g, ""), frac: n[2] ?? "", unit };
}

function clip(s: string): string {
  return s.length > 24 ? `${s.slice(0, 23)}…` : s;
}

/**
 * A time in whole ns, floored (`up` false) or ceiled (`up` true) where the text holds a
 * fraction of a ns; null past Number's safe integers.
 */
function toNs(t: Time, unit: string, up: boolean): number | null {
  const exp = UNIT_EXP[unit];
  const whole = (t.int + t.frac.padEnd(exp, "0").slice(0, exp)).replace(/^0+(?=\d)/, "");
  const rest = /[1-9]/.test(t.frac.slice(exp));
  const v = Number(whole);
  if (!Number.isSafeInteger(v) || !Number.isSafeInteger(v + 1)) return null;
  // floor(-x.5) is -(x+1), ceil(-x.5) is -x: the fraction moves the value toward +inf only when ceiling
  if (t.neg) return -v - (rest && !up ? 1 : 0);
  return v + (rest && up ? 1 : 0);
}

/** Splits "A..B" at its one separator. */
function splitPair(text: string): [string, string] | string {
  const parts = text.split(/\.\.|…|–|—/);
  if (parts.length === 1) return "a range needs two times: A..B (e.g. 100ms..110ms)";
  if (parts.length > 2) return "one \"..\" between the two times";
  if (!parts[0].trim() || !parts[1].trim()) return "a range needs two times: A..B (e.g. 100ms..110ms)";
  return [parts[0], parts[1]];
}

function findStep(steps: readonly StepSpan[], n: number): StepSpan | string {
  const s = steps.find((x) => x.step === n);
  if (s) return s;
  const lo = steps[0].step;
  const hi = steps[steps.length - 1].step;
  return `no step ${n}: this trace has step${lo === hi ? ` ${lo}` : `s ${lo}–${hi}`}`;
}

function stepsMissing(steps: readonly StepSpan[] | null): string | null {
  if (steps === null) return "the trace's steps are still loading";
  if (!steps.length) return "this trace has no steps (ProfilerStep#N): give times from the trace start";
  return null;
}

/** [base + a, base + b) from a pair of times; each side's unit from the other where missing. */
function timesRange(pair: [string, string], base: number, relative: boolean): Range | string {
  const a = parseTime(pair[0]);
  if (typeof a === "string") return a;
  const b = parseTime(pair[1]);
  if (typeof b === "string") return b;
  const ua = a.unit ?? b.unit;
  const ub = b.unit ?? a.unit;
  if (ua === null || ub === null) return `give a unit: ${UNIT_WORDS} (e.g. 100ms..110ms)`;
  if (!relative && (a.neg || b.neg)) return "a time from the trace start is never negative";
  const start = toNs(a, ua, false);
  const end = toNs(b, ub, true);
  if (start === null || end === null) return "a time is too large";
  if (end <= start) return "the end must come after the start";
  return { start: base + start, end: base + end };
}

/**
 * The range the text names on the timeline's clock, clamped to the trace (`bounds`); `steps`:
 * the trace's steps (null: not known yet; needed only for a text that names a step).
 */
export function parseTypedRange(text: string, steps: readonly StepSpan[] | null, bounds: Range): TypedRange {
  const t = text.trim().toLowerCase().replace(/μ/g, "µ"); // Greek mu as the micro sign
  if (!t) return fail("type a range, e.g. step 17 +100ms..+110ms or 100ms..110ms");
  if (t.length > 200) return fail("too long");
  let r: Range | string;
  const sm = /^(?:profiler)?step\s*#?\s*(\d+)\s*[:,]?\s*(.*)$/.exec(t);
  if (sm) {
    const missing = stepsMissing(steps);
    if (missing) return fail(missing);
    const s = findStep(steps!, Number(sm[1]));
    if (typeof s === "string") return fail(s);
    const rest = sm[2];
    const span = /^(?:\.\.|…|–|—)\s*(?:(?:profiler)?step\s*#?\s*)?(\d+)$/.exec(rest);
    if (rest === "") r = { start: s.start, end: s.end };
    else if (span) {
      const last = findStep(steps!, Number(span[1]));
      if (typeof last === "string") return fail(last);
      r = last.end > s.start ? { start: s.start, end: last.end } : "the last step must come after the first";
    } else {
      const pair = splitPair(rest);
      r = typeof pair === "string" ? pair : timesRange(pair, s.start, true);
    }
  } else if (/^[a-z]/.test(t)) {
    return fail(`"${clip(t.split(/\s/)[0])}": start with a time (100ms..110ms) or "step N"`);
  } else {
    const pair = splitPair(t);
    r = typeof pair === "string" ? pair : timesRange(pair, 0, false);
  }
  if (typeof r === "string") return fail(r);
  if (r.end <= bounds.start || r.start >= bounds.end) {
    return fail(`outside the trace (${fmtDuration(bounds.start)} – ${fmtDuration(bounds.end)})`);
  }
  return { ok: true, range: { start: Math.max(r.start, bounds.start), end: Math.min(r.end, bounds.end) } };
}

/**
 * The box's text for a range, exact to the ns so that it parses back to the same range:
 * "step 17" (exactly a step), "step 17 +1.25ms..+3.5ms" (from the step holding its start),
 * else "1.25ms..3.5ms" from the trace start.
 */
export function formatTypedRange(r: Range, steps: readonly StepSpan[] | null): string {
  const s = steps && steps.length ? stepAt(steps, r.start) : null;
  const off = (ns: number, signed: boolean) => {
    const text = fmtOffset(ns, true, true).replace("µs", "us");
    return signed ? text : text.replace(/^\+/, "");
  };
  if (s && r.start === s.start && r.end === s.end) return `step ${s.step}`;
  if (s) return `step ${s.step} ${off(r.start - s.start, true)}..${off(r.end - s.start, true)}`;
  return `${off(r.start, false)}..${off(r.end, false)}`;
}
