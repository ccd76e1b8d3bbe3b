// @vitest-environment jsdom
// The Snapshot section on canned replies of the snapshot routes: bands never cover each
// other, the snapshot's clock lands on the trace's exactly (BigInt: wall-clock ns exceed a
// JS number's exact range), devices match by number, and the section shows the routes'
// numbers (summary, allocator state by pool, OOM advice) and nothing for a run without one.
import { act } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setApiBase } from "../../api/client";
import { reloadAll } from "../../api/hooks";
import { mount } from "../../testing/mount";
import { overlaps } from "./overlay";
import { SnapshotSection } from "./Snapshot";
import { AllocatorState, OomReportView } from "./SnapshotState";
import {
  bandOutline, deviceNumber, fragmentationPct, layoutBands, overlayPoints, poolLabel, toTraceNs, toWallUs, type Band, type SnapAllocation, type SnapshotAtReply,
} from "./snapshotData";

vi.mock("./SnapshotChart", () => ({
  SnapshotChart: ({ d }: { d: { points: unknown[]; allocations: unknown[] } }) => <div data-testid="chart" data-points={d.points.length} data-allocations={d.allocations.length} />,
}));

const MB = 1 << 20;
const alloc = (size: number, s: number, e: number | null, stack = 0): SnapAllocation => ({ addr: "0x7f0000000000", size, stream: 0, start_us: s, end_us: e, stack });

describe("allocation bands", () => {
  /** A band's bottom at time x (ns), from its steps. */
  const bottomAt = (b: Band, x: number) => b.steps.filter((p) => p[0] <= x).slice(-1)[0][1];

  it("stack as memory_viz stacks them: the live bands tile [0, their total] at every time", () => {
    const allocs = [alloc(2 * MB, 0, 10), alloc(MB, 2, 5), alloc(4 * MB, 6, null), alloc(MB, 11, 12), alloc(3 * MB, 3, 8),
      alloc(MB / 2, null as unknown as number, 7)];
    allocs[5].start_us = null; // allocated before the history
    const bands = layoutBands(allocs, 0, 20);
    expect(bands).toHaveLength(6);
    for (let t = 0; t < 20; t += 0.5) {
      const x = t * 1000;
      const live = bands.filter((b) => b.x0 <= x && x < b.x1).map((b) => [bottomAt(b, x), bottomAt(b, x) + b.alloc.size]).sort((p, q) => p[0] - q[0]);
      let top = 0;
      for (const [lo, hi] of live) { expect(lo).toBe(top); top = hi; }
      expect(top).toBe(live.length ? allocs.filter((a) => (a.start_us ?? 0) <= t && t < (a.end_us ?? 20)).reduce((n, a) => n + a.size, 0) : 0);
    }
    const pre = bands.find((b) => b.alloc.start_us === null)!;
    expect(pre.x0).toBe(0);
    expect(bottomAt(pre, 0)).toBe(0);                     // under everything allocated later
    const first = bands.find((b) => b.alloc.start_us === 0)!;
    expect(bottomAt(first, 0)).toBe(MB / 2);
    expect(bottomAt(first, 7000)).toBe(0);                // dropped when the one under it was freed
    expect(bands.find((b) => b.alloc.start_us === 11)!.steps[0][1]).toBe(4 * MB); // on top of the live 4 MiB
    expect(bands.find((b) => b.alloc.end_us === null)!.x1).toBe(20_000); // still live: to the end (ns)
  });

  it("outline a band with its steps down and its top a size above", () => {
    const [low, high] = layoutBands([alloc(MB, 0, 4), alloc(2 * MB, 1, 6)], 0, 10);
    expect(low.steps).toEqual([[0, 0]]);
    expect(high.steps).toEqual([[1000, MB], [4000, 0]]);
    expect(bandOutline(high)).toEqual([[1000, MB], [4000, MB], [4000, 0], [6000, 0],
      [6000, 2 * MB], [4000, 2 * MB], [4000, 3 * MB], [1000, 3 * MB]]);
  });
});

describe("joining the snapshot to the trace", () => {
  it("places wall-clock µs on the trace's ns exactly", () => {
    const wall = "1795690252163660018";
    expect(toTraceNs(1795690252163661, wall)).toBe(982);
    expect(toTraceNs(1795690252163660, wall)).toBe(-18);
  });
  it("turns a window of the trace back into wall-clock µs (floored)", () => {
    const wall = "1795690252163660018";
    expect(toWallUs(982, wall)).toBe(1795690252163661);
    expect(toWallUs(-18, wall)).toBe(1795690252163660);
    expect(toWallUs(-19, "0")).toBe(-1);
  });
  it("keeps the points inside the curve, one either side", () => {
    const wall = "1000000000";
    const pts = [0, 1000, 2000, 3000, 4000].map((t, i) => ({ time_us: 1_000_000 + t, allocated_bytes: i, reserved_bytes: null }));
    expect(overlayPoints(pts, wall, [1_500_000, 2_500_000]).map((p) => p[1])).toEqual([1, 2, 3]);
    expect(overlayPoints(pts, wall, [9e9, 1e10])).toEqual([]);
    expect(overlaps([1_000_000, 1_004_000], wall, [0, 100])).toBe(true);
    expect(overlaps([1_000_000, 1_004_000], wall, [5e6, 6e6])).toBe(false);
    expect(overlaps(null, wall, [0, 1])).toBe(false);
  });
  it("matches devices by number, not the CPU", () => {
    expect(deviceNumber("GPU1")).toBe(1);
    expect(deviceNumber("cuda:0")).toBe(0);
    expect(deviceNumber("CPU")).toBeNull();
  });
});

const AT: SnapshotAtReply = {
  snapshot: "snap.pickle", time_us: null, device: 0, segments_total: 2, blocks_total: 3,
  segments: [
    { segment: 0, address: "0x7f0000000000", total_size: 20 * MB, allocated_bytes: 12 * MB, active_bytes: 12 * MB, free_external_bytes: 8 * MB, free_internal_bytes: 512, stream: 0, segment_type: "large", pool: [0, 0], is_expandable: 0, fragmentation: 0.4 },
    { segment: 1, address: "0x7f0001400000", total_size: 2 * MB, allocated_bytes: MB, active_bytes: MB, free_external_bytes: MB, free_internal_bytes: 0, stream: 7, segment_type: "small", pool: [1, 2], is_expandable: 0, fragmentation: null },
  ],
  blocks: [{ segment: 0, address: "0x7f0000000000", size: 12 * MB, requested_size: 12 * MB - 512, state: "active_allocated", stack: -1 }],
  totals: { reserved_bytes: 22 * MB, allocated_bytes: 13 * MB, active_bytes: 13 * MB, free_external_bytes: 9 * MB, free_internal_bytes: 512 },
  pools: [{ pool: [0, 0], stream: 0, segment_type: "large", segments: 1, reserved_bytes: 20 * MB, allocated_bytes: 12 * MB, active_bytes: 12 * MB, free_external_bytes: 8 * MB, free_internal_bytes: 512 }],
  stacks: {},
};

describe("allocator state and OOM", () => {
  it("shows totals, pools and fragmentation as the route gives them", () => {
    expect(fragmentationPct(AT.segments[0])).toBeCloseTo(40);
    expect(fragmentationPct(AT.segments[1])).toBeCloseTo(50);
    expect(poolLabel([0, 0])).toBe("default");
    expect(poolLabel([1, 2])).toBe("(1, 2)");
    const el = mount(<AllocatorState at={AT} run="r" onEnd={null} />);
    const totals = el.querySelector('[aria-label="Allocator totals"]')!.textContent!;
    expect(totals).toContain("22"); // reserved 22 MB
    expect(el.textContent).toContain("default");
    expect(el.textContent).toContain("At the snapshot's end");
  });
  it("gives the OOM's figures and advice", () => {
    const el = mount(<OomReportView n={1} run="r" t0Us={0} r={{ time_us: 1000, device: 0, requested_bytes: 30 * MB, device_free_bytes: 0, reserved_bytes: 22 * MB, allocated_bytes: 13 * MB, free_in_segments_bytes: 9 * MB, largest_free_block_bytes: 8 * MB, live: [{ stack: 0, frames: "forward (model.py:3)", bytes: 12 * MB, count: 1 }], advice: ["Set expandable_segments:True"] }} />);
    expect(el.querySelector('[aria-label="Advice"]')!.textContent).toContain("expandable_segments");
    expect(el.textContent).toContain("forward (model.py:3)");
  });
});

describe("the section", () => {
  const replies: Record<string, unknown> = {};
  beforeEach(() => {
    reloadAll();
    setApiBase("http://test/");
    vi.stubGlobal("fetch", vi.fn(async (url: string) => {
      const route = new URL(url).pathname.slice(1);
      const body = replies[route];
      return body === undefined
        ? new Response(JSON.stringify({ error: "no" }), { status: 404 })
        : new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } });
    }));
  });
  afterEach(() => vi.unstubAllGlobals());

  async function settle() {
    for (let i = 0; i < 10; i++) await act(async () => { await new Promise((r) => setTimeout(r, 0)); });
  }

  it("is absent for a run without snapshots", async () => {
    replies["snapshots"] = { run: "r", snapshots: [] };
    const el = mount(<SnapshotSection sel={{ run: "r" }} dark={false} />);
    await settle();
    expect(el.textContent).toBe("");
  });

  it("shows the routes' numbers", async () => {
    Object.assign(replies, {
      snapshots: { run: "r", snapshots: [{ snapshot: "snap.pickle", size: 10, mtime: 0 }] },
      "snapshot/summary": { snapshot: "snap.pickle", segments: 2, reserved_bytes: 22 * MB, allocated_bytes: 13 * MB, active_bytes: 13 * MB, free_external_bytes: 9 * MB, free_internal_bytes: 512, peak_allocated_bytes: 30 * MB, history_entries: 41, devices: [0], oom_count: 1, time_range_us: [1000, 9000] },
      "snapshot/timeline": { snapshot: "snap.pickle", device: 0, points: [{ time_us: 1000, allocated_bytes: 0, reserved_bytes: 0 }, { time_us: 2000, allocated_bytes: 30 * MB, reserved_bytes: 40 * MB }], peak: { time_us: 2000, allocated_bytes: 30 * MB }, allocations: [alloc(30 * MB, 2000, null)], allocations_total: 1, stacks: {} },
      "snapshot/live": { snapshot: "snap.pickle", time_us: null, at_peak: true, device: 0, rows: [{ stack: 0, frames: "train_step (train.py:10)", bytes: 30 * MB, count: 1 }] },
      "snapshot/at": AT,
      "snapshot/ooms": { snapshot: "snap.pickle", total: 1, ooms: [{ time_us: 9000, device: 0, requested_bytes: 64 * MB, device_free_bytes: 0, reserved_bytes: 40 * MB, allocated_bytes: 30 * MB, free_in_segments_bytes: 10 * MB, largest_free_block_bytes: 8 * MB, live: [], advice: ["Reduce the batch size"] }] },
    });
    const el = mount(<SnapshotSection sel={{ run: "r" }} dark={false} />);
    await settle();
    const summary = el.querySelector('[aria-label="Snapshot summary"]')!.textContent!;
    expect(summary).toContain("30"); // peak allocated, MB
    expect(summary).toContain("41"); // history entries
    expect(el.querySelector('[data-testid="chart"]')!.getAttribute("data-points")).toBe("2");
    expect(el.textContent).toContain("train_step (train.py:10)");
    expect(el.textContent).toContain("Reduce the batch size");
    expect(el.textContent).toContain("Out of memory");
  });
});

describe("band colors", () => {
  it("name the first frame outside the allocator", async () => {
    const { topFrame } = await import("./snapshotData");
    expect(topFrame([{ filename: "??", line: 0, name: "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc" }, { filename: "/home/u/model.py", line: 52, name: "attention" }]))
      .toBe("attention (/home/u/model.py:52)");
    expect(topFrame([])).toBe("");
  });
});
