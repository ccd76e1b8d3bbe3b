// @vitest-environment jsdom
// The range selected on the timeline's ruler (pixels -> whole ns inside the trace, its
// label) and the range statistics panel's tables (a tab per kind, the kind's rows, the
// "more names" note).
import { act } from "react";
import { describe, expect, it } from "vitest";
import { parseRange, rangeFromDrag, rangeLabel } from "../../timeline/rangeSelect";
import { kindTabLabel, RangeStatsTables, rowsOfKind, type RangeStatsReply } from "./RangeStats";
import { mount } from "../../testing/mount";



describe("range from a drag on the ruler", () => {
  const vp = { start: 1000, end: 2000, width: 100 }; // 10 ns per px
  const bounds = { start: 0, end: 5000 };

  it("maps pixels to whole ns, either direction", () => {
    expect(rangeFromDrag(10, 30, vp, bounds)).toEqual({ start: 1100, end: 1300 });
    expect(rangeFromDrag(30, 10, vp, bounds)).toEqual({ start: 1100, end: 1300 });
    // fractions: the start is floored, the end ceiled (the range covers what was dragged)
    expect(rangeFromDrag(10.25, 30.25, vp, bounds)).toEqual({ start: 1102, end: 1303 });
  });

  it("stays inside the trace", () => {
    expect(rangeFromDrag(-50, 20, { start: 0, end: 1000, width: 100 }, bounds)).toEqual({ start: 0, end: 200 });
    expect(rangeFromDrag(90, 150, { start: 4000, end: 5000, width: 100 }, bounds)).toEqual({ start: 4900, end: 5000 });
  });

  it("is null when nothing is left", () => {
    expect(rangeFromDrag(-20, -10, vp, { start: 1000, end: 5000 })).toBeNull();
    expect(rangeFromDrag(10, 10, vp, bounds)).toEqual(null);
  });

  it("is labelled with its start, end and length", () => {
    expect(rangeLabel({ start: 1_000_000, end: 3_500_000 })).toBe("1 ms – 3.5 ms (2.5 ms)");
    expect(rangeLabel({ start: 0, end: 250 })).toBe("0 – 250 ns (250 ns)");
  });

  it("parses a range from text", () => {
    expect(parseRange("10", "20")).toEqual({ start: 10, end: 20 });
    expect(parseRange("20", "10")).toBeNull();
    expect(parseRange("-1", "10")).toBeNull();
    expect(parseRange("1e3", "2000")).toBeNull();
    expect(parseRange(undefined, "10")).toBeNull();
  });
});

const reply: RangeStatsReply = {
  start_ns: 100,
  end_ns: 900,
  events: 6,
  kinds: [
    { kind: "operator", label: "Operators", count: 4, total_ns: 700, self_ns: 400 },
    { kind: "kernel", label: "Kernels", count: 2, total_ns: 300, self_ns: 300 },
  ],
  rows: [
    { kind: "operator", name: "aten::conv2d", count: 3, total_ns: 600, self_ns: 300, avg_ns: 250, max_ns: 400 },
    { kind: "operator", name: "<script>x</script>", count: 1, total_ns: 100, self_ns: 100, avg_ns: 100, max_ns: 100 },
    { kind: "kernel", name: "volta_sgemm", count: 2, total_ns: 300, self_ns: 300, avg_ns: 150, max_ns: 200, launched_by: "aten::mm" },
  ],
  more: { kernel: 7 },
};

function tableRows(el: HTMLElement): string[][] {
  return [...el.querySelectorAll("table.data tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? ""));
}

describe("range statistics tables", () => {
  it("splits the rows by kind", () => {
    expect(rowsOfKind(reply, "operator").map((r) => r.name)).toEqual(["aten::conv2d", "<script>x</script>"]);
    expect(rowsOfKind(reply, "memcpy")).toEqual([]);
    expect(kindTabLabel(reply.kinds[0])).toBe("Operators (4)");
  });

  it("shows a tab per kind and the chosen kind's rows, names as text", () => {
    const el = mount(<RangeStatsTables d={reply} kind="operator" onKind={() => undefined} />);
    expect([...el.querySelectorAll('[role="tab"]')].map((t) => t.textContent)).toEqual(["Operators (4)", "Kernels (2)"]);
    expect(el.querySelector('[aria-selected="true"]')?.textContent).toBe("Operators (4)");
    expect(tableRows(el)).toEqual([
      ["aten::conv2d", "3", "0.600", "0.300", "0.250", "0.400"],
      ["<script>x</script>", "1", "0.100", "0.100", "0.100", "0.100"],
    ]);
    expect(el.querySelector("script")).toBeNull();
    expect(el.querySelector(".range-more")).toBeNull();
  });

  it("says how many names of a kind were left out", () => {
    const el = mount(<RangeStatsTables d={reply} kind="kernel" onKind={() => undefined} />);
    // device work names what launched it (second column)
    expect(tableRows(el)).toEqual([["volta_sgemm", "aten::mm", "2", "0.300", "0.300", "0.150", "0.200"]]);
    expect(el.querySelector(".range-more")?.textContent).toContain("7 more names");
    expect(el.querySelector(".range-kind-totals")?.textContent).toContain("Kernels: 2 events");
  });

  it("falls back to the first kind and asks for another on a tab click", () => {
    const asked: string[] = [];
    const el = mount(<RangeStatsTables d={reply} kind="memcpy" onKind={(k) => asked.push(k)} />);
    expect(el.querySelector(".range-kind")?.getAttribute("data-kind")).toBe("operator");
    act(() => (el.querySelectorAll('[role="tab"]')[1] as HTMLButtonElement).click());
    expect(asked).toEqual(["kernel"]);
  });

  it("says so when the range holds no events", () => {
    const el = mount(<RangeStatsTables d={{ ...reply, events: 0, kinds: [], rows: [], more: {} }} kind={null} onKind={() => undefined} />);
    expect(el.textContent).toContain("No events in this range.");
  });
});
