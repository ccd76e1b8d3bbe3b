import { describe, expect, it } from "vitest";
import {
  fmtBytes, fmtCount, fmtDeltaDuration, fmtDuration, fmtNumber, fmtPct, fmtUs, fmtWallTime,
} from "./format";

describe("fmtDuration", () => {
  it("picks a unit and three significant digits", () => {
    expect(fmtDuration(0)).toBe("0");
    expect(fmtDuration(950)).toBe("950 ns");
    expect(fmtDuration(1500)).toBe("1.5 µs");
    expect(fmtDuration(12345678)).toBe("12.3 ms");
    expect(fmtDuration(171772000)).toBe("172 ms");
    expect(fmtDuration(1.5e9)).toBe("1.5 s");
    expect(fmtDuration(125e9)).toBe("2 min 5 s");
    expect(fmtDuration(-2500)).toBe("-2.5 µs");
  });
  it("gives headline numbers four digits", () => {
    expect(fmtDuration(177_612_345, 4)).toBe("177.6 ms");
    expect(fmtDuration(4_990_000, 4)).toBe("4.99 ms");
    expect(fmtDuration(1_234_567_890, 4)).toBe("1.235 s");
    expect(fmtDuration(999, 4)).toBe("999 ns");
  });
  it("shows a dash for missing values", () => {
    expect(fmtDuration(null)).toBe("–");
    expect(fmtDuration(undefined)).toBe("–");
    expect(fmtDuration(NaN)).toBe("–");
  });
});

describe("fmtUs", () => {
  it("uses µs with digits by magnitude and separators", () => {
    expect(fmtUs(0)).toBe("0");
    expect(fmtUs(1500)).toBe("1.50");
    expect(fmtUs(12345)).toBe("12.3");
    expect(fmtUs(12345678)).toBe("12,346");
    expect(fmtUs(250)).toBe("0.250");
    expect(fmtUs(null)).toBe("–");
  });
});

describe("fmtDeltaDuration", () => {
  it("signs deltas", () => {
    expect(fmtDeltaDuration(1500000)).toBe("+1.5 ms");
    expect(fmtDeltaDuration(-200000)).toBe("-200 µs");
    expect(fmtDeltaDuration(0)).toBe("0");
  });
});

describe("fmtBytes", () => {
  it("uses binary units", () => {
    expect(fmtBytes(512)).toBe("512 B");
    expect(fmtBytes(1536)).toBe("1.5 KiB");
    expect(fmtBytes(2791636480)).toBe("2.6 GiB");
    expect(fmtBytes(34084028416)).toBe("31.7 GiB");
    expect(fmtBytes(-1048576)).toBe("-1 MiB");
    expect(fmtBytes(null)).toBe("–");
  });
});

describe("fmtPct / fmtCount / fmtNumber", () => {
  it("formats", () => {
    expect(fmtPct(57.345)).toBe("57.3%");
    expect(fmtPct(null)).toBe("–");
    expect(fmtPct(0, 0)).toBe("0%");
    expect(fmtCount(8772)).toBe("8,772");
    expect(fmtCount(53.333333)).toBe("53.33");
    expect(fmtNumber(29.9712, 1)).toBe("30");
    expect(fmtNumber(1234.5)).toBe("1,234.5");
  });
});

describe("fmtWallTime", () => {
  it("adds a relative offset to a decimal-string origin exactly", () => {
    const origin = "1623143089861000000"; // beyond 2^53: must not go through a double
    const t = fmtWallTime(origin, 1500000);
    expect(t).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.862$/);
  });
  it("returns '' for unknown origins", () => {
    expect(fmtWallTime(null, 0)).toBe("");
    expect(fmtWallTime("abc", 0)).toBe("");
  });
});
