// The Trace view's typed range: every form of the grammar, exact decimal -> ns conversion,
// clamping to the trace, a short reason for each bad input (never an exception), and the
// box's text for a selected range parsing back to the same range.
import { describe, expect, it } from "vitest";
import type { StepSpan } from "../../timeline/steps";
import { formatTypedRange, parseTypedRange, type TypedRange } from "./typedRange";

const MS = 1_000_000;
const bounds = { start: 0, end: 1_000 * MS };
const steps: StepSpan[] = [
  { step: 16, start: 100 * MS, end: 270 * MS },
  { step: 17, start: 270 * MS, end: 430 * MS },
  { step: 18, start: 430 * MS, end: 600 * MS + 123 },
];

function range(text: string, s: StepSpan[] | null = steps): { start: number; end: number } {
  const r = parseTypedRange(text, s, bounds);
  if (!r.ok) throw new Error(`${text}: ${r.error}`);
  return r.range;
}

function error(text: string, s: StepSpan[] | null = steps): string {
  const r: TypedRange = parseTypedRange(text, s, bounds);
  if (r.ok) throw new Error(`${text} parsed as ${JSON.stringify(r.range)}`);
  return r.error;
}

describe("parseTypedRange", () => {
  it("reads a window of a step relative to its start", () => {
    expect(range("step 17 +100ms..+110ms")).toEqual({ start: 370 * MS, end: 380 * MS });
    expect(range("Step #17: 100 ms .. 110 ms")).toEqual({ start: 370 * MS, end: 380 * MS });
    expect(range("ProfilerStep#17 -5ms..+1ms")).toEqual({ start: 265 * MS, end: 271 * MS });
    expect(range("step17 +1.5..+2.25ms")).toEqual({ start: 271.5 * MS, end: 272.25 * MS });
  });

  it("reads a whole step and a run of steps", () => {
    expect(range("step 17")).toEqual({ start: 270 * MS, end: 430 * MS });
    expect(range("  STEP 18 ")).toEqual({ start: 430 * MS, end: 600 * MS + 123 });
    expect(range("step 16..18")).toEqual({ start: 100 * MS, end: 600 * MS + 123 });
    expect(range("step 16..step 17")).toEqual({ start: 100 * MS, end: 430 * MS });
  });

  it("reads times from the trace start in every unit", () => {
    expect(range("100ms..110ms")).toEqual({ start: 100 * MS, end: 110 * MS });
    expect(range("1234.5us..2000us")).toEqual({ start: 1_234_500, end: 2_000_000 });
    expect(range("1234.5µs..2000μs")).toEqual({ start: 1_234_500, end: 2_000_000 }); // micro sign, Greek mu
    expect(range("500ns..0.75us")).toEqual({ start: 500, end: 750 });
    expect(range("0.1s..0.2s")).toEqual({ start: 100 * MS, end: 200 * MS });
    expect(range("1,234.5us – 2,000us")).toEqual({ start: 1_234_500, end: 2_000_000 }); // as the details panel writes µs
    expect(range("100…110ms")).toEqual({ start: 100 * MS, end: 110 * MS });
  });

  it("turns decimals into ns exactly, covering a fraction of a ns", () => {
    // 0.1 * 1e6 in floating point is 100000.00000000001: a float conversion would ceil it to 100001
    expect(range("0.1ms..0.3ms")).toEqual({ start: 100_000, end: 300_000 });
    expect(range("1.0004us..1.0006us")).toEqual({ start: 1_000, end: 1_001 });
    expect(range("step 17 -0.5ns..+0.5ns")).toEqual({ start: 270 * MS - 1, end: 270 * MS + 1 });
  });

  it("clamps to the trace", () => {
    expect(range("900ms..2s")).toEqual({ start: 900 * MS, end: 1_000 * MS });
    expect(range("step 16 -200ms..+1ms")).toEqual({ start: 0, end: 101 * MS });
  });

  it("says what is wrong, without throwing", () => {
    expect(error("")).toMatch(/type a range/);
    expect(error("100ms")).toMatch(/two times/);
    expect(error("100..110")).toMatch(/give a unit/);
    expect(error("100ms..110xs")).toMatch(/unknown unit "xs"/);
    expect(error("110ms..100ms")).toMatch(/end must come after the start/);
    expect(error("5ms..5ms")).toMatch(/end must come after the start/);
    expect(error("-5ms..10ms")).toMatch(/never negative/);
    expect(error("step 99")).toBe("no step 99: this trace has steps 16–18");
    expect(error("step 18..16")).toMatch(/last step must come after/);
    expect(error("step 17", null)).toMatch(/still loading/);
    expect(error("step 17 +1ms..+2ms", [])).toMatch(/no steps/);
    expect(error("2s..3s")).toMatch(/outside the trace/);
    expect(error("1..2..3ms")).toMatch(/one "\.\."/);
    expect(error("1.2.3ms..4ms")).toMatch(/not a number/);
    expect(error("foo..bar")).toMatch(/start with a time/);
    expect(error("1ms..99999999999999999999s")).toMatch(/too large/);
    expect(error("x".repeat(300))).toBe("too long");
    // whatever is typed, an answer and no exception
    for (const t of ["..", "step", "step x", "+", "1e3ms..2e3ms", "step 17 ..", "<img src=x>", "\u202e100ms..1s"]) {
      expect(() => parseTypedRange(t, steps, bounds)).not.toThrow();
      expect(parseTypedRange(t, steps, bounds).ok).toBe(false);
    }
  });
});

describe("formatTypedRange", () => {
  it("writes a step, a window of a step, or times from the trace start", () => {
    expect(formatTypedRange({ start: 270 * MS, end: 430 * MS }, steps)).toBe("step 17");
    expect(formatTypedRange({ start: 370 * MS, end: 380 * MS + 250 }, steps)).toBe("step 17 +100.000ms..+110.00025ms");
    expect(formatTypedRange({ start: 1_500, end: 90 * MS }, steps)).toBe("1.500us..90.000ms");
    expect(formatTypedRange({ start: 370 * MS, end: 380 * MS }, null)).toBe("370.000ms..380.000ms");
  });

  it("parses back to the same range, to the ns", () => {
    const ranges = [
      { start: 270 * MS, end: 430 * MS },
      { start: 370 * MS + 1, end: 371 * MS + 999 },
      { start: 429 * MS + 999_999, end: 600 * MS + 123 },
      { start: 3, end: 17 },
      { start: 12_345_678_123 % bounds.end, end: 999 * MS + 7 },
    ];
    for (const r of ranges) {
      for (const s of [steps, null]) expect(range(formatTypedRange(r, s), s)).toEqual(r);
    }
  });
});
