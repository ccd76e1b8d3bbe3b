// Step-relative times and exact starts: which step holds a time (its end belongs to the
// next step, or with closedEnd to itself), offsets exact to the ns, and the ruler's marks.
import { describe, expect, it } from "vitest";
import { fmtExactUs, fmtOffset, fmtStepTime, stepAt, stepMarks, stepRangeLabel, stepSpans, type StepSpan } from "./steps";

const MS = 1_000_000;
const steps: StepSpan[] = stepSpans([
  { step: 17, start_ns: 270 * MS, end_ns: 430 * MS },
  { step: 16, start_ns: 100 * MS, end_ns: 270 * MS },
  { step: 18, start_ns: 450 * MS, end_ns: 600 * MS },
  { step: 19, start_ns: 700 * MS, end_ns: 700 * MS }, // empty: left out
]);

describe("stepSpans and stepAt", () => {
  it("sorts the steps and finds the one holding a time", () => {
    expect(steps.map((s) => s.step)).toEqual([16, 17, 18]);
    expect(stepAt(steps, 100 * MS)?.step).toBe(16);
    expect(stepAt(steps, 270 * MS - 1)?.step).toBe(16);
    expect(stepAt(steps, 270 * MS)?.step).toBe(17);
    expect(stepAt(steps, 99 * MS)).toBeNull();
    expect(stepAt(steps, 440 * MS)).toBeNull(); // between steps
    expect(stepAt(steps, 600 * MS)).toBeNull();
    expect(stepAt([], 5)).toBeNull();
  });

  it("gives a range's end to the step it closes", () => {
    expect(stepAt(steps, 270 * MS, true)?.step).toBe(16);
    expect(stepAt(steps, 600 * MS, true)?.step).toBe(18);
    expect(stepAt(steps, 100 * MS, true)).toBeNull();
  });
});

describe("fmtOffset", () => {
  it("rounds to 3 decimals of its unit", () => {
    expect(fmtOffset(103_250_000)).toBe("+103.250 ms");
    expect(fmtOffset(103_250_600)).toBe("+103.251 ms");
    expect(fmtOffset(-2_000)).toBe("-2.000 µs");
    expect(fmtOffset(999_999_600)).toBe("+1.000 s"); // rounds up into the next unit
    expect(fmtOffset(0)).toBe("+0 ns");
    expect(fmtOffset(12.6)).toBe("+13 ns");
    expect(fmtOffset(1_500, false, true)).toBe("+1.500µs");
  });

  it("keeps every ns when exact", () => {
    expect(fmtOffset(103_250_123, true)).toBe("+103.250123 ms");
    expect(fmtOffset(103_250_000, true)).toBe("+103.250 ms");
    expect(fmtOffset(2_000_000_001, true)).toBe("+2.000000001 s");
    expect(fmtOffset(1_234, true)).toBe("+1.234 µs");
  });
});

describe("fmtStepTime, fmtExactUs and stepRangeLabel", () => {
  it("says a time relative to its step", () => {
    expect(fmtStepTime(373_250_000, steps)).toBe("step 17 +103.250 ms");
    expect(fmtStepTime(373_250_001, steps, true)).toBe("step 17 +103.250001 ms");
    expect(fmtStepTime(50, steps)).toBeNull();
    expect(fmtStepTime(50, null)).toBeNull();
  });

  it("writes the exact µs of a start", () => {
    expect(fmtExactUs(12_345_678_123)).toBe("12,345,678.123 µs");
    expect(fmtExactUs(5)).toBe("0.005 µs");
    expect(fmtExactUs(1_000)).toBe("1.000 µs");
    expect(fmtExactUs(0)).toBe("0.000 µs");
  });

  it("labels a range within one step or across two", () => {
    expect(stepRangeLabel({ start: 271 * MS, end: 273_500_000 }, steps)).toBe("step 17 +1.000 ms – +3.500 ms");
    expect(stepRangeLabel({ start: 260 * MS, end: 272 * MS }, steps)).toBe("step 16 +160.000 ms – step 17 +2.000 ms");
    expect(stepRangeLabel({ start: 300 * MS, end: 430 * MS }, steps)).toBe("step 17 +30.000 ms – +160.000 ms");
    expect(stepRangeLabel({ start: 50, end: 272 * MS }, steps)).toBeNull();
  });
});

describe("stepMarks", () => {
  const width = (label: string) => label.length * 6;
  it("marks each step start in view and pins the step holding the left edge", () => {
    const marks = stepMarks(steps, { start: 200 * MS, end: 500 * MS, width: 300 }, width);
    expect(marks).toEqual([
      { step: 16, x: 0, label: "step 16", pinned: true },
      { step: 17, x: 70, label: "step 17", pinned: false },
      { step: 18, x: 250, label: "step 18", pinned: false },
    ]);
  });

  it("drops a label that would run into the next mark", () => {
    const marks = stepMarks(steps, { start: 265 * MS, end: 500 * MS, width: 235 }, width);
    expect(marks.map((m) => [m.step, m.label])).toEqual([[16, ""], [17, "step 17"], [18, "step 18"]]);
  });

  it("marks nothing outside the steps", () => {
    expect(stepMarks(steps, { start: 0, end: 90 * MS, width: 100 }, width)).toEqual([]);
    expect(stepMarks([], { start: 0, end: 90 * MS, width: 100 }, width)).toEqual([]);
  });
});
