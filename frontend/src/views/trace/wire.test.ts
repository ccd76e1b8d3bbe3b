import { describe, expect, it } from "vitest";
import type { TimelineReply } from "../../api/types/trace";
import { busyRows, fromWire, type WireReply } from "./wire";

describe("busy blocks over the wire", () => {
  it("turns the columns into rows, block k from the k-th item of each", () => {
    const rows = busyRows({ track: [0, 2], depth: [3, 0], start_ns: [10, 500], end_ns: [20, 900], count: [4, 1] });
    expect(rows).toEqual([
      { track: 0, depth: 3, start_ns: 10, end_ns: 20, count: 4 },
      { track: 2, depth: 0, start_ns: 500, end_ns: 900, count: 1 },
    ]);
    expect(busyRows({ track: [], depth: [], start_ns: [], end_ns: [], count: [] })).toEqual([]);
  });

  it("refuses columns of different lengths", () => {
    expect(() => busyRows({ track: [0, 1], depth: [0], start_ns: [1, 2], end_ns: [2, 3], count: [1, 1] })).toThrow(/differ in length/);
  });

  it("keeps the rest of the reply as it is", () => {
    const wire = {
      origin_ns: "5", span: { start_ns: 0, end_ns: 9 }, window: { start_ns: 0, end_ns: 9 }, ns_per_px: 1,
      tracks: [], events: [], counts: { events: 0, busy: 1, in_window: 3 }, truncated: false,
      busy: { track: [1], depth: [2], start_ns: [3], end_ns: [4], count: [3] },
    } as WireReply<TimelineReply>;
    const r = fromWire(wire);
    expect(r.busy).toEqual([{ track: 1, depth: 2, start_ns: 3, end_ns: 4, count: 3 }]);
    expect(r.counts).toBe(wire.counts);
    expect(r.origin_ns).toBe("5");
  });
});
