// The timeline's keyboard cursor: next / previous on a row, parent / first child and the rows
// above / below (across tracks, skipping empty rows), where it starts, and the window that
// shows where it went.
import { describe, expect, it } from "vitest";
import { firstInView, navigate, nearestInRow, pastWindow, revealEvent, stepOnRow, type NavEvent, type NavRow } from "./eventNav";

function ev(i: number, track: number, depth: number, ts_ns: number, dur_ns: number): NavEvent {
  return { i, track, depth, ts_ns, dur_ns };
}

// track 0: a parent (0..100) with children 10..30, 40..60 and a grandchild; a second parent 120..200
// track 1 (a device stream): kernels at 25..35 and 150..160; track 2 has nothing drawn
const events: NavEvent[] = [
  ev(5, 0, 1, 40, 20),
  ev(1, 0, 0, 0, 100),
  ev(4, 0, 1, 10, 20),
  ev(7, 0, 2, 45, 5),
  ev(2, 0, 0, 120, 80),
  ev(9, 1, 0, 25, 10),
  ev(10, 1, 0, 150, 10),
  ev(11, 0, 1, 130, 0), // zero-length markers sharing a start: ordered by i
  ev(12, 0, 1, 130, 0),
];
const rows: NavRow[] = [
  { track: 0, depth: 0 }, { track: 0, depth: 1 }, { track: 0, depth: 2 }, { track: 2, depth: 0 }, { track: 1, depth: 0 },
];
const byI = (i: number) => events.find((e) => e.i === i)!;

describe("stepOnRow and navigate next / prev", () => {
  it("walks a row in time order and stops at its ends", () => {
    const walk: number[] = [];
    for (let e: NavEvent | null = byI(4); e; e = stepOnRow(events, e, 1)) walk.push(e.i);
    expect(walk).toEqual([4, 5, 11, 12]);
    const back: number[] = [];
    for (let e: NavEvent | null = byI(12); e; e = stepOnRow(events, e, -1)) back.push(e.i);
    expect(back).toEqual([12, 11, 5, 4]);
    expect(navigate(events, rows, byI(1), "next")?.i).toBe(2);
    expect(navigate(events, rows, byI(2), "next")).toBeNull();
    expect(navigate(events, rows, byI(1), "prev")).toBeNull();
  });

  it("steps from an event the window does not carry (the cursor kept from before a pan)", () => {
    expect(stepOnRow(events, ev(99, 0, 1, 35, 2), 1)?.i).toBe(5);
    expect(stepOnRow(events, ev(99, 0, 1, 35, 2), -1)?.i).toBe(4);
  });
});

describe("navigate up / down", () => {
  it("goes to the parent and to the first child", () => {
    expect(navigate(events, rows, byI(7), "up")?.i).toBe(5);
    expect(navigate(events, rows, byI(5), "up")?.i).toBe(1);
    expect(navigate(events, rows, byI(1), "down")?.i).toBe(4); // the first child, not the nearest middle
    expect(navigate(events, rows, byI(5), "down")?.i).toBe(7);
    expect(navigate(events, rows, byI(2), "down")?.i).toBe(11);
  });

  it("goes to the nearest event of the next row that has one, across tracks", () => {
    // 4 (10..30) has no child: the row below's nearest event is 7 (45..50)
    expect(navigate(events, rows, byI(4), "down")?.i).toBe(7);
    // down from the last row of track 0 skips the empty track 2 and lands on the nearest kernel
    expect(navigate(events, rows, byI(7), "down")?.i).toBe(9);
    // up from the kernel: track 2 is empty, track 0's deepest row has only 7
    expect(navigate(events, rows, byI(10), "up")?.i).toBe(7);
    expect(navigate(events, rows, byI(1), "up")).toBeNull();
    expect(navigate(events, rows, byI(10), "down")).toBeNull();
  });

  it("does nothing on a row that is not drawn (a folded track)", () => {
    expect(navigate(events, rows.slice(0, 2), byI(7), "up")).toBeNull();
  });
});

describe("nearestInRow", () => {
  it("prefers overlap, then the smallest gap, then the earlier", () => {
    expect(nearestInRow(events, { track: 0, depth: 1 }, ev(0, 9, 0, 31, 8))?.i).toBe(4); // gaps 1 and 1: earlier wins
    expect(nearestInRow(events, { track: 0, depth: 1 }, ev(0, 9, 0, 32, 1))?.i).toBe(4); // gaps 2 and 7
    expect(nearestInRow(events, { track: 2, depth: 0 }, ev(0, 9, 0, 32, 1))).toBeNull();
  });
});

describe("firstInView", () => {
  it("starts on the first row with an event in view, its first one starting inside", () => {
    expect(firstInView(events, rows, { start: 0, end: 1000 })?.i).toBe(1);
    expect(firstInView(events, rows, { start: 50, end: 1000 })?.i).toBe(2); // 1 began before the window
    expect(firstInView(events, rows, { start: 50, end: 110 })?.i).toBe(1); // nothing starts inside: 1 overlaps
    expect(firstInView(events, rows, { start: 205, end: 300 })).toBeNull();
  });
});

describe("revealEvent and pastWindow", () => {
  const bounds = { start: 0, end: 10_000 };
  const vp = { start: 1_000, end: 2_000, width: 500 };
  it("keeps the window while the event is in it", () => {
    expect(revealEvent(ev(0, 0, 0, 1_200, 100), vp, bounds)).toBe(vp);
  });

  it("pans the least at the same zoom, with a margin", () => {
    expect(revealEvent(ev(0, 0, 0, 2_100, 100), vp, bounds)).toEqual({ start: 1_250, end: 2_250, width: 500 });
    expect(revealEvent(ev(0, 0, 0, 500, 100), vp, bounds)).toEqual({ start: 450, end: 1_450, width: 500 });
    expect(revealEvent(ev(0, 0, 0, 0, 10), vp, bounds)).toEqual({ start: 0, end: 1_000, width: 500 }); // clamped
  });

  it("leaves a long event that is partly in view where it is", () => {
    expect(revealEvent(ev(0, 0, 0, 0, 5_000), vp, bounds)).toBe(vp);
    expect(revealEvent(ev(0, 0, 0, 3_000, 5_000), vp, bounds)).toEqual({ start: 2_950, end: 3_950, width: 500 });
  });

  it("moves on past the window's last event, and stops at the trace's edge", () => {
    expect(pastWindow(ev(0, 0, 0, 1_800, 100), vp, bounds, 1)).toEqual({ start: 1_950, end: 2_950, width: 500 });
    expect(pastWindow(ev(0, 0, 0, 1_100, 100), vp, bounds, -1)).toEqual({ start: 50, end: 1_050, width: 500 });
    // a cursor reaching past the window: the next event starts after it
    expect(pastWindow(ev(0, 0, 0, 1_500, 3_000), vp, bounds, 1)).toEqual({ start: 4_450, end: 5_450, width: 500 });
    expect(pastWindow(ev(0, 0, 0, 100, 100), { start: 0, end: 1_000, width: 500 }, bounds, -1)).toBeNull();
    expect(pastWindow(ev(0, 0, 0, 9_500, 100), { start: 9_000, end: 10_000, width: 500 }, bounds, 1)).toBeNull();
  });
});
