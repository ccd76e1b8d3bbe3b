// @vitest-environment jsdom
// The Ranks mode's data handling (chosen ranks from the URL, the picker's limit of 8, the
// alignment line, which worker a merged track belongs to), the progress shown while the
// server summarizes ranks, and the server-sorted instances table.
import { act } from "react";
import { describe, expect, it, vi } from "vitest";
import type { RankRow } from "../../api/types/distributed";
import { DataTable } from "../../components/DataTable";
import { Progress, rankProgressText } from "../../components/common";
import { detailsOnAxis, globalId, splitId, trackRanks, withGlobalIds } from "./merge";
import { alignments, alignmentText } from "./Ranks";
import { parseRanks, RankPicker, toggleRank } from "./RankPicker";
import { mount } from "../../testing/mount";



function row(rank: number, extra: Partial<RankRow> = {}): RankRow {
  return {
    rank, worker: `w${rank}`, steps: 2, step_ns: 1000 * (10 - rank), computation_ns: 1, communication_ns: 1, overlap_ns: 0, other_ns: 0,
    wait_ns: 0, transfer_ns: 0, clock_offset_ns: 0, clock_method: "collectives", outlier: false, outlier_reason: null, ...extra,
  };
}

describe("chosen ranks", () => {
  it("reads the URL's ranks: known ones, no repeats, at most 8", () => {
    const known = new Set([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(parseRanks(undefined, known)).toBeNull();
    expect(parseRanks("x,42", known)).toBeNull();
    expect(parseRanks("3,3,1,x,42", known)).toEqual([3, 1]);
    expect(parseRanks("0,1,2,3,4,5,6,7,8,9", known)).toHaveLength(8);
  });
  it("adds a rank while fewer than 8 are chosen, keeps them slowest first", () => {
    const order = [9, 8, 7, 6, 5, 4, 3, 2, 1, 0];
    expect(toggleRank([9, 7], 8, order)).toEqual([9, 8, 7]);
    expect(toggleRank([9, 8, 7], 8, order)).toEqual([9, 7]);
    const eight = order.slice(0, 8);
    expect(toggleRank(eight, 0, order)).toEqual(eight);
  });
  it("disables the other ranks once 8 are chosen, and picks the slowest on request", () => {
    const rows = Array.from({ length: 10 }, (_, i) => row(i, i === 2 ? { outlier: true, outlier_reason: "slow" } : {}));
    const onChange = vi.fn();
    const el = mount(<RankPicker rows={rows} chosen={[0, 1, 2, 3, 4, 5, 6, 7]} onChange={onChange} />);
    act(() => el.querySelector("button")!.dispatchEvent(new MouseEvent("click", { bubbles: true })));
    const boxes = [...el.querySelectorAll<HTMLInputElement>("input[type=checkbox]")];
    expect(boxes).toHaveLength(10);
    expect(boxes.filter((b) => b.disabled).map((b) => b.dataset.rank)).toEqual(["8", "9"]);
    expect(el.textContent).toContain("⚠ rank 2");
    const four = [...el.querySelectorAll("button")].find((b) => b.textContent === "4 slowest")!;
    act(() => four.dispatchEvent(new MouseEvent("click", { bubbles: true })));
    expect(onChange).toHaveBeenCalledWith([0, 1, 2, 3]);
  });
});

describe("untrusted worker names", () => {
  it("render as text in the picker", () => {
    const el = mount(<RankPicker rows={[row(0, { worker: `<img src=x onerror="window.__pwned=1">` })]} chosen={[0]} onChange={() => undefined} />);
    act(() => el.querySelector("button")!.dispatchEvent(new MouseEvent("click", { bubbles: true })));
    expect(el.querySelector("img")).toBeNull();
    expect(el.querySelector("bdi")!.textContent).toBe(`<img src=x onerror="window.__pwned=1">`);
  });
});

describe("alignment", () => {
  it("names each rank's shift onto the common axis, with its clock method", () => {
    const al = alignments({ workers: [{ worker: "w3", offset_ns: 12300, clock_offset_ns: -289000 }, { worker: "w1", rank: 1, offset_ns: 0, clock_offset_ns: 0 }] } as never, [row(3), row(1)]);
    expect(al.map((a) => [a.rank, a.clock_method])).toEqual([[3, "collectives"], [1, "collectives"]]);
    expect(alignmentText(al)).toBe("rank 3 (w3) +12.3 µs [clock -289 µs by collectives], rank 1 (w1) 0");
  });
});

describe("merged ids", () => {
  const track = (id: number, worker: string) => ({ id, kind: "host", pid: "1", tid: "1", process: `${worker}: python (1)`, thread: "t", max_depth: 3, worker });
  const reply = {
    origin_ns: "1000", wall_origin_ns: "5000", span: { start_ns: 0, end_ns: 100 }, window: { start_ns: 0, end_ns: 100 }, ns_per_px: 1,
    tracks: [track(0, "w5"), track(1, "w5"), track(2, "w1")],
    events: [{ i: 7, track: 1, depth: 0, name: "a", cat: "cpu_op", ts_ns: 10, dur_ns: 5 }, { i: 7, track: 2, depth: 0, name: "b", cat: "cpu_op", ts_ns: 12, dur_ns: 5 }],
    busy: [],
    flows: [{ kind: "fwdbwd", from: 7, from_ts_ns: 10, from_track: 1, from_depth: 0, to: 9, to_ts_ns: 40, to_track: 2, to_depth: 1 }],
    counts: { events: 2, busy: 0, in_window: 2 }, truncated: false,
    workers: [{ worker: "w5", rank: 5, offset_ns: 300, tracks: [0, 2] as [number, number] }, { worker: "w1", rank: 1, offset_ns: 0, tracks: [2, 1] as [number, number] }],
  };
  it("keeps two ranks' events with the same index apart", () => {
    expect([...trackRanks(reply)]).toEqual([[0, 0], [1, 0], [2, 1]]);
    const m = withGlobalIds(reply);
    expect(m.events.map((e) => e.i)).toEqual([globalId(7, 0), globalId(7, 1)]);
    expect(new Set(m.events.map((e) => e.i)).size).toBe(2);
    expect([m.flows[0].from, m.flows[0].to]).toEqual([globalId(7, 0), globalId(9, 1)]);
    expect(splitId(globalId(123456, 5))).toEqual({ i: 123456, k: 5 });
  });
  it("finds a track's rank by its worker field when the ranges are not given", () => {
    expect([...trackRanks({ ...reply, workers: reply.workers.map(({ tracks: _t, ...w }) => w) })]).toEqual([[0, 0], [1, 0], [2, 1]]);
  });
  it("moves an event's details onto the merged axis, tracks and ids", () => {
    const d = {
      origin_ns: "999", event: { i: 4, name: "x", cat: "cpu_op", ts_ns: 50, dur_ns: 5, pid: "1", tid: "1", track: 1, depth: 2 }, args: {},
      links: [{ i: 8, relation: "backward", name: "y", cat: "cpu_op", ts_ns: 70, track: 0, depth: 1 }, { i: 9, relation: "launched", name: "k", cat: "kernel" }],
    };
    const m = detailsOnAxis(d, 0, reply);
    expect(m.event).toMatchObject({ i: globalId(4, 0), ts_ns: 350, track: 1 });
    expect(m.links[0]).toMatchObject({ i: globalId(8, 0), ts_ns: 370, track: 0 });
    expect(m.links[1].ts_ns).toBeUndefined();
    expect([m.origin_ns, m.wall_origin_ns]).toEqual(["1000", "5000"]);
    expect(detailsOnAxis(d, 1, reply).event).toMatchObject({ i: globalId(4, 1), ts_ns: 50, track: 3 });
  });
});

describe("progress while summarizing", () => {
  it("counts ranks with a bar, not a spinner", () => {
    expect(rankProgressText(37, 64)).toBe("Summarizing 37 / 64 ranks…");
    const el = mount(<Progress progress={{ loading: true, summarized: 37, total: 64 }} />);
    expect(el.textContent).toBe("Summarizing 37 / 64 ranks…");
    expect(el.querySelector(".spinner")).toBeNull();
    const bar = el.querySelector("[role=progressbar]")!;
    expect(bar.getAttribute("aria-valuenow")).toBe("37");
    expect((bar.firstChild as HTMLElement).style.width).toBe(`${(100 * 37) / 64}%`);
  });
  it("keeps the byte progress of traces still loading", () => {
    const el = mount(<Progress progress={{ loading: true, loaded_bytes: 1024, total_bytes: 2048 }} />);
    expect(el.textContent).toContain("Loading traces — 1 KiB of 2 KiB (50%)");
  });
});

describe("server-sorted table", () => {
  it("keeps the server's order and asks the server to sort", () => {
    const onChange = vi.fn();
    const rows = [{ k: "b", v: 1 }, { k: "a", v: 3 }];
    const el = mount(
      <DataTable
        rows={rows}
        cols={[{ id: "k", header: "Key", value: (r) => r.k }, { id: "v", header: "Value", value: (r) => r.v, kind: "count" }]}
        serverSort={{ id: "k", desc: true, ids: ["v"], onChange }}
      />,
    );
    expect([...el.querySelectorAll("tbody td:first-child")].map((td) => td.textContent)).toEqual(["b", "a"]);
    const [keyHead, valueHead] = [...el.querySelectorAll<HTMLButtonElement>("th button")];
    act(() => keyHead.dispatchEvent(new MouseEvent("click", { bubbles: true })));
    expect(onChange).not.toHaveBeenCalled();
    act(() => valueHead.dispatchEvent(new MouseEvent("click", { bubbles: true })));
    expect(onChange).toHaveBeenCalledWith("v");
    expect([...el.querySelectorAll("tbody td:first-child")].map((td) => td.textContent)).toEqual(["b", "a"]);
  });
});
