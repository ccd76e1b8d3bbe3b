// Axis ticks, one helper for every chart: the ECharts value axes (valueAxis), the trace
// timeline's ruler (timeline/coords: ticks), the launch histograms' log axis (logTicks).
// Ticks fall on "nice" values: multiples of a step of 1, 2, 2.5 or 5 × 10^k in the axis'
// unit, which is one for the whole axis: durations in ns, µs, ms or s; bytes in B, KiB,
// MiB, GiB, TiB (powers of 1024: a step of 256 MiB is "0.25 GiB", never "268 MB"); plain
// numbers (GB/s, counts) without a unit. Never a value like "1.2345 ms" or "37.77 MiB":
// an axis whose ends are not nice (a time range) shows only the nice values inside it.

export type TickUnit = "duration" | "bytes" | "number" | "count";

const MANTISSAS = [1, 2, 2.5, 5];

/** 1, 2, 2.5 or 5 times a power of ten, the first at least `raw` (`integer`: a whole number, at least 1). */
export function niceStep(raw: number, integer = false): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  if (integer && raw <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [...MANTISSAS, 10]) {
    const s = Number((m * p).toPrecision(12));
    if (integer && !Number.isInteger(s)) continue;
    if (s >= raw * (1 - 1e-9)) return s;
  }
  return Number((10 * p).toPrecision(12));
}

export interface AxisUnit {
  /** base units (ns, bytes) per axis unit */
  scale: number;
  /** "ms", "MiB"; "" for plain numbers */
  suffix: string;
}

const DURATION_UNITS: AxisUnit[] = [
  { scale: 1e9, suffix: "s" }, { scale: 1e6, suffix: "ms" }, { scale: 1e3, suffix: "µs" }, { scale: 1, suffix: "ns" },
];
const BYTE_UNITS: AxisUnit[] = [
  { scale: 1024 ** 4, suffix: "TiB" }, { scale: 1024 ** 3, suffix: "GiB" }, { scale: 1024 ** 2, suffix: "MiB" },
  { scale: 1024, suffix: "KiB" }, { scale: 1, suffix: "B" },
];

/** The unit an axis reaching `magnitude` (its largest absolute value) is labelled in. */
export function axisUnit(kind: TickUnit, magnitude: number): AxisUnit {
  const units = kind === "duration" ? DURATION_UNITS : kind === "bytes" ? BYTE_UNITS : null;
  if (!units) return { scale: 1, suffix: "" };
  const m = Math.abs(magnitude);
  return units.find((u) => m >= u.scale) ?? units[units.length - 1];
}

/** Decimals that show every multiple of `x` exactly (0.25 -> 2, 5 -> 0). */
function decimalsOf(x: number): number {
  for (let d = 0; d < 12; d++) {
    const f = 10 ** d;
    if (Math.abs(Math.round(x * f) - x * f) < 1e-6) return d;
  }
  return 12;
}

/** The step of an axis: nice in the axis' unit, whole base units for durations, bytes and counts. */
export function axisStep(kind: TickUnit, unit: AxisUnit, raw: number): number {
  const integer = kind === "count" || (unit.scale === 1 && kind !== "number");
  return Number((niceStep(raw / unit.scale, integer) * unit.scale).toPrecision(12));
}

/** Labels of the multiples of `step` in `unit`: "2.5 ms", "0.25 GiB", "+500 µs" (signed). */
export function tickFormatter(unit: AxisUnit, step: number, signed = false): (v: number) => string {
  const decimals = decimalsOf(step / unit.scale);
  return (v: number) => {
    let x = Number((v / unit.scale).toFixed(decimals));
    if (Object.is(x, -0) || x === 0) x = 0;
    const s = x.toLocaleString("en-US", { minimumFractionDigits: 0, maximumFractionDigits: decimals });
    return (signed && x > 0 ? "+" : "") + s + (unit.suffix ? ` ${unit.suffix}` : "");
  };
}

/** Whether v is a multiple of step (up to rounding). */
export function onGrid(v: number, step: number): boolean {
  const k = v / step;
  return Math.abs(k - Math.round(k)) < 1e-6;
}

export interface NiceAxis {
  /** the axis' ends: lo / hi rounded outwards to the step, or lo / hi themselves (`exact`) */
  min: number;
  max: number;
  step: number;
  unit: AxisUnit;
  /** the tick values, multiples of step from min to max */
  ticks: number[];
  /** a tick's label; "" for a value off the grid */
  format: (v: number) => string;
}

export interface NiceAxisOptions {
  /** about this many intervals at most (default 5) */
  count?: number;
  /** keep lo and hi as the axis' ends (a time range); the ticks are the nice values inside */
  exact?: boolean;
  /** "+" before positive labels (deltas) */
  signed?: boolean;
}

/** Nice ticks for an axis over [lo, hi] of `kind` values. */
export function niceAxis(lo: number, hi: number, kind: TickUnit, opts: NiceAxisOptions = {}): NiceAxis {
  const count = Math.max(1, opts.count ?? 5);
  if (!Number.isFinite(lo)) lo = 0;
  if (!Number.isFinite(hi)) hi = lo;
  if (hi < lo) [lo, hi] = [hi, lo];
  if (hi === lo) {
    if (opts.exact) hi = lo + 1;
    else if (lo > 0) lo = 0;
    else if (hi < 0) hi = 0;
    else hi = 1;
  }
  const unit = axisUnit(kind, Math.max(Math.abs(lo), Math.abs(hi)));
  const step = axisStep(kind, unit, (hi - lo) / count);
  const min = opts.exact ? lo : Math.floor(lo / step + 1e-9) * step;
  const max = opts.exact ? hi : Math.ceil(hi / step - 1e-9) * step;
  const ticks: number[] = [];
  const k0 = Math.ceil(min / step - 1e-9);
  const k1 = Math.floor(max / step + 1e-9);
  for (let k = k0; k <= k1 && ticks.length < 1000; k++) ticks.push(Number((k * step).toPrecision(15)));
  const label = tickFormatter(unit, step, opts.signed);
  return { min, max, step, unit, ticks, format: (v: number) => (onGrid(v, step) ? label(v) : "") };
}

/**
 * An ECharts value axis over [lo, hi] (the data's extent; bars: from 0) with nice ticks:
 * its ends, the tick values (axisLabel / axisTick customValues: also the split lines) and
 * their labels. `extra` is merged in (name, position...; its axisLabel into the labels').
 */
export function valueAxis(lo: number, hi: number, kind: TickUnit, opts: NiceAxisOptions & { extra?: Record<string, any> } = {}) {
  const a = niceAxis(lo, hi, kind, opts);
  const { axisLabel, ...extra } = opts.extra ?? {};
  return {
    type: "value" as const,
    min: a.min,
    max: a.max,
    interval: a.step,
    ...extra,
    axisTick: { customValues: a.ticks },
    axisLabel: { hideOverlap: true, ...(axisLabel ?? {}), customValues: a.ticks, formatter: a.format },
    tbTicks: { step: a.step, unit: a.unit.suffix, ticks: a.ticks },
  };
}

/** The extent [lo, hi] of numbers (and 0 with `zero`), [0, 0] for none. */
export function extentOf(values: Iterable<number | null | undefined>, zero = true): [number, number] {
  let lo = zero ? 0 : Infinity;
  let hi = zero ? 0 : -Infinity;
  for (const v of values) {
    if (v === null || v === undefined || !Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : [0, 0];
}

/** The extent of stacked bars: per category, the sum of the positive and of the negative parts. */
export function stackedExtent(series: (number | null | undefined)[][]): [number, number] {
  const n = Math.max(0, ...series.map((s) => s.length));
  const tops: number[] = [];
  for (let i = 0; i < n; i++) {
    let pos = 0;
    let neg = 0;
    for (const s of series) {
      const v = s[i];
      if (v === null || v === undefined || !Number.isFinite(v)) continue;
      if (v > 0) pos += v;
      else neg += v;
    }
    tops.push(pos, neg);
  }
  return extentOf(tops);
}

/**
 * Nice values for a logarithmic axis over [lo, hi] (lo > 0): 1, 2 and 5 × 10^k where few
 * decades are spanned, powers of ten where more are (every other one, ... past `count`).
 */
export function logTicks(lo: number, hi: number, count = 8): number[] {
  if (!(lo > 0) || !(hi >= lo)) return [];
  const e0 = Math.floor(Math.log10(lo));
  const e1 = Math.ceil(Math.log10(hi));
  const inside = (ms: number[]) => {
    const out: number[] = [];
    for (let e = e0; e <= e1; e++) {
      for (const m of ms) {
        const v = Number((m * 10 ** e).toPrecision(12));
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push(v);
      }
    }
    return out;
  };
  const fine = inside([1, 2, 5]);
  if (fine.length <= count) return fine;
  const decades = inside([1]);
  const every = Math.ceil(decades.length / count);
  return decades.filter((v) => Math.round(Math.log10(v)) % every === 0);
}
