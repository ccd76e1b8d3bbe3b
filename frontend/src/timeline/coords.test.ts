import { describe, expect, it } from "vitest";
import {
  MIN_SPAN_NS, binPoints, clampViewport, counterAt, fitRange, hitTest, isWellVisible, jumpWindow, layoutTracks,
  niceStep, nsPerPx, panBy, rowMiddle, spanToPx, tickLabel, ticks, timeToX, xToTime, zoomAt,
} from "./coords";

const bounds = { start: 0, end: 1_000_000 };
const vp = { start: 0, end: 1_000_000, width: 1000 };

describe("time <-> pixels", () => {
  it("is linear and invertible", () => {
    expect(nsPerPx(vp)).toBe(1000);
    expect(timeToX(250_000, vp)).toBe(250);
    expect(xToTime(250, vp)).toBe(250_000);
    const v2 = { start: 123_456, end: 223_456, width: 800 };
    for (const t of [123_456, 150_000, 223_455]) expect(xToTime(timeToX(t, v2), v2)).toBeCloseTo(t, 6);
  });
});

describe("zoomAt", () => {
  it("keeps the time under the cursor in place", () => {
    const z = zoomAt(vp, 4, 300, bounds);
    expect(z.end - z.start).toBe(250_000);
    expect(xToTime(300, z)).toBeCloseTo(300_000, 6);
  });
  it("clamps to the trace on zoom out and to the minimum span on zoom in", () => {
    const out = zoomAt({ start: 400_000, end: 500_000, width: 1000 }, 0.01, 900, bounds);
    expect(out).toEqual({ start: 0, end: 1_000_000, width: 1000 });
    const deep = zoomAt(vp, 1e9, 500, bounds);
    expect(deep.end - deep.start).toBe(MIN_SPAN_NS);
    expect(deep.start).toBeGreaterThanOrEqual(0);
  });
  it("ignores nonsense factors", () => {
    expect(zoomAt(vp, 0, 10, bounds)).toBe(vp);
    expect(zoomAt(vp, NaN, 10, bounds)).toBe(vp);
  });
});

describe("panBy / clampViewport", () => {
  it("drags the content with the mouse", () => {
    const v = { start: 400_000, end: 500_000, width: 1000 };
    const p = panBy(v, 100, bounds); // drag right by 100 px = 10 µs earlier
    expect(p.start).toBe(390_000);
    expect(p.end).toBe(490_000);
  });
  it("stops at the edges without changing the zoom", () => {
    const v = { start: 10_000, end: 110_000, width: 1000 };
    expect(panBy(v, 5000, bounds)).toEqual({ start: 0, end: 100_000, width: 1000 });
    expect(panBy(v, -1e7, bounds)).toEqual({ start: 900_000, end: 1_000_000, width: 1000 });
  });
  it("repairs bad windows", () => {
    expect(clampViewport({ start: NaN, end: NaN, width: 10 }, bounds)).toEqual({ start: 0, end: 1_000_000, width: 10 });
    expect(clampViewport({ start: -5, end: 5e9, width: 10 }, bounds)).toEqual({ start: 0, end: 1_000_000, width: 10 });
  });
});

describe("fitRange", () => {
  it("frames an event with a margin", () => {
    const f = fitRange(100_000, 200_000, 1000, bounds, 0.1);
    expect(f.start).toBe(90_000);
    expect(f.end).toBe(210_000);
  });
});

describe("ticks", () => {
  it("uses 1-2-5 steps", () => {
    expect(niceStep(0.7)).toBe(1);
    expect(niceStep(1)).toBe(1);
    expect(niceStep(130)).toBe(200);
    expect(niceStep(4100)).toBe(5000);
    expect(niceStep(7e6)).toBe(1e7);
  });
  it("places round ticks inside the window", () => {
    const t = ticks({ start: 1_050, end: 11_050, width: 1000 }, 90);
    expect(t.step).toBe(1000);
    expect(t.times[0]).toBe(2000);
    expect(t.times.at(-1)).toBe(11000);
  });
  it("labels ticks in the step's unit", () => {
    expect(tickLabel(2_500_000, 500_000)).toBe("2.5 ms");
    expect(tickLabel(3_000_000_000, 1e9)).toBe("3 s");
    expect(tickLabel(1500, 100)).toBe("1.5 µs");
    expect(tickLabel(0, 100)).toBe("0 ns");
    expect(tickLabel(300, 100)).toBe("300 ns");
    expect(tickLabel(12_000, 2000)).toBe("12 µs");
  });
});

describe("spanToPx", () => {
  it("clips and widens to one pixel", () => {
    expect(spanToPx(100_000, 10, vp)).toEqual({ x: 100, w: 1 });
    expect(spanToPx(-50_000, 100_000, vp)).toEqual({ x: -1, w: 51 });
    expect(spanToPx(2_000_000, 10, vp)).toBeNull();
  });
});

describe("layoutTracks / hitTest", () => {
  const tracks = [{ id: 0, max_depth: 2 }, { id: 3, max_depth: 0 }];
  const { boxes, height } = layoutTracks(tracks, 20, 16, new Set(), 4);
  it("stacks tracks with a header and a row per depth", () => {
    expect(boxes).toEqual([
      { id: 0, y: 0, height: 76, rows: 3 },
      { id: 3, y: 80, height: 36, rows: 1 },
    ]);
    expect(height).toBe(120);
    const c = layoutTracks(tracks, 20, 16, new Set([0]), 4);
    expect(c.boxes[0]).toEqual({ id: 0, y: 0, height: 16, rows: 0 });
  });
  it("finds the event under the pointer", () => {
    const items = [
      { i: 1, track: 0, depth: 0, ts_ns: 0, dur_ns: 500_000 },
      { i: 2, track: 0, depth: 1, ts_ns: 100_000, dur_ns: 100_000 },
      { i: 3, track: 3, depth: 0, ts_ns: 600_000, dur_ns: 100 }, // 0.1 px wide
    ];
    expect(hitTest(items, boxes, 150, 16 + 25, vp, 20, 16)?.i).toBe(2);
    expect(hitTest(items, boxes, 150, 16 + 5, vp, 20, 16)?.i).toBe(1);
    expect(hitTest(items, boxes, 150, 5, vp, 20, 16)).toBeNull(); // header strip
    expect(hitTest(items, boxes, 601, 80 + 16 + 5, vp, 20, 16)?.i).toBe(3); // within slop
    expect(hitTest(items, boxes, 610, 80 + 16 + 5, vp, 20, 16)).toBeNull();
    expect(hitTest(items, boxes, 150, 78, vp, 20, 16)).toBeNull(); // the gap
  });
});

describe("counterAt", () => {
  it("holds the last value at or before t", () => {
    const pts: [number, number | null][] = [[10, 1], [20, 5], [30, null], [40, 2]];
    expect(counterAt(pts, 5)).toBeNull();
    expect(counterAt(pts, 10)).toBe(1);
    expect(counterAt(pts, 19)).toBe(1);
    expect(counterAt(pts, 25)).toBe(5);
    expect(counterAt(pts, 35)).toBeNull();
    expect(counterAt(pts, 1e9)).toBe(2);
    expect(counterAt([], 3)).toBeNull();
  });
});

describe("binned counters", () => {
  it("puts bin k at start + k * (end - start) / bins", () => {
    expect(binPoints(100, 200, [0.5, 1, 0, 0.25])).toEqual([[100, 0.5], [125, 1], [150, 0], [175, 0.25]]);
    expect(binPoints(0, 10, [])).toEqual([]);
    const pts = binPoints(0, 1000, [0, 0.4, 1]);
    expect(counterAt(pts, 400)).toBe(0.4);
    expect(counterAt(pts, 999)).toBe(1);
  });
});

describe("flows and jumps", () => {
  const box = { id: 0, y: 100, height: 16 + 3 * 20, rows: 3 };
  it("anchors an arrow in the middle of its row, or of the header of a folded track", () => {
    expect(rowMiddle(box, 0, 20, 16)).toBe(126);
    expect(rowMiddle(box, 2, 20, 16)).toBe(166);
    expect(rowMiddle(box, 9, 20, 16)).toBe(166); // deeper than drawn: the last row
    expect(rowMiddle({ ...box, rows: 0, height: 16 }, 2, 20, 16)).toBe(108);
  });
  it("jumps only to what is not already well visible", () => {
    expect(isWellVisible(100_000, 10_000, vp)).toBe(true); // 10 px wide
    expect(isWellVisible(100_000, 1_000, vp)).toBe(false); // 1 px
    expect(isWellVisible(999_000, 10_000, vp)).toBe(false); // runs past the end
    const w = jumpWindow(400_000, 2_000, 1000, bounds);
    expect([w.start, w.end]).toEqual([398_000, 404_000]); // the event is the middle third
    const z = jumpWindow(500, 0, 1000, bounds); // zero-length: 1 µs of context each side, clamped
    expect([z.start, z.end]).toEqual([0, 3000]);
  });
});
