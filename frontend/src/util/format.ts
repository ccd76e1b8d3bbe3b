// Number formatting for tables, charts and tooltips. Inputs come from the API as
// integer nanoseconds, bytes and 0..100 percentages; null means "not available".

const DASH = "–";

function trim(s: string): string {
  // "1.50" -> "1.5", "2.00" -> "2"; only after a decimal point
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

/** `n` significant digits (at least the integer part), never exponent notation. */
function sig(x: number, n = 3): string {
  const a = Math.abs(x);
  const intDigits = a >= 1 ? Math.floor(Math.log10(a)) + 1 : 1;
  return trim(x.toFixed(Math.max(0, n - intDigits)));
}

function sig3(x: number): string {
  return sig(x, 3);
}

/**
 * A duration in ns with an adaptive unit and `digits` significant digits (3: "950 ns",
 * "1.5 µs", "12.3 ms", "1.5 s"; 4 for headline numbers: "177.6 ms"); "2 min 5 s" past a minute.
 */
export function fmtDuration(ns: number | null | undefined, digits = 3): string {
  if (ns === null || ns === undefined || !Number.isFinite(ns)) return DASH;
  const a = Math.abs(ns);
  if (a === 0) return "0";
  if (a < 1e3) return `${sig(ns, digits)} ns`;
  if (a < 1e6) return `${sig(ns / 1e3, digits)} µs`;
  if (a < 1e9) return `${sig(ns / 1e6, digits)} ms`;
  if (a < 60e9) return `${sig(ns / 1e9, digits)} s`;
  const sign = ns < 0 ? "-" : "";
  const totalS = Math.round(a / 1e9);
  const m = Math.floor(totalS / 60);
  const s = totalS % 60;
  return `${sign}${m} min ${s} s`;
}

/** A duration in ns shown in µs with a fixed unit (table columns): "12,345.7". */
export function fmtUs(ns: number | null | undefined): string {
  if (ns === null || ns === undefined || !Number.isFinite(ns)) return DASH;
  const us = ns / 1e3;
  const a = Math.abs(us);
  const digits = a === 0 ? 0 : a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return us.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** A signed delta duration: "+1.5 ms", "-200 µs", "0". */
export function fmtDeltaDuration(ns: number | null | undefined): string {
  if (ns === null || ns === undefined || !Number.isFinite(ns)) return DASH;
  if (ns === 0) return "0";
  return (ns > 0 ? "+" : "") + fmtDuration(ns);
}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** Bytes with binary units: "512 B", "1.5 KiB", "2.79 GiB". Negative sizes keep their sign. */
export function fmtBytes(b: number | null | undefined): string {
  if (b === null || b === undefined || !Number.isFinite(b)) return DASH;
  const a = Math.abs(b);
  if (a < 1024) return `${b} B`;
  let u = 0;
  let v = a;
  while (v >= 1024 && u < BYTE_UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return `${b < 0 ? "-" : ""}${sig3(v)} ${BYTE_UNITS[u]}`;
}

/** A 0..100 percentage: "12.3%"; null -> dash. */
export function fmtPct(p: number | null | undefined, digits = 1): string {
  if (p === null || p === undefined || !Number.isFinite(p)) return DASH;
  return `${p.toFixed(digits)}%`;
}

/** An integer count with thousands separators; fractions (per-step averages) keep 2 digits. */
export function fmtCount(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return DASH;
  if (Number.isInteger(n)) return n.toLocaleString("en-US");
  return n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

/** A plain number, up to `digits` decimals, with separators. */
export function fmtNumber(n: number | null | undefined, digits = 2): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return DASH;
  return n.toLocaleString("en-US", { maximumFractionDigits: digits });
}

/**
 * Wall-clock time of a relative timestamp: origin_ns is the absolute origin as a
 * decimal string (beyond a double's exact range), rel_ns the offset from it.
 * Returns an ISO-like local time with milliseconds, or "" when the origin is unknown.
 */
export function fmtWallTime(originNs: string | null | undefined, relNs: number): string {
  if (!originNs || !/^\d+$/.test(originNs)) return "";
  const abs = BigInt(originNs) + BigInt(Math.round(relNs));
  const ms = Number(abs / 1000000n);
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (x: number, w = 2) => String(x).padStart(w, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
  );
}
