// @vitest-environment jsdom
// Names with bidi controls everywhere they appear outside the main tables: the Trace view's
// details panel and tooltips, canvas labels (timeline, flame graph), the Distributed
// view's worker cells, HTML chart tooltips (Diff, Distributed, pies), key/value lists and
// notes. Each shows the control as a visible marker and isolates the name (<bdi>), so that
// a U+202E cannot display it (or the text after it) reversed.
import { describe, expect, it } from "vitest";
import type { EventDetailReply } from "../api/types/trace";
import { mount } from "../testing/mount";
import { canvasLabel, showBidiControls } from "../util/bidi";
import { nameHtml, tooltipLine } from "../util/escape";
import { breakdownChart, deltaChart } from "../views/Diff";
import { figureCols } from "../views/Distributed";
import { RecommendationList } from "../views/Overview";
import { lateBarsOption, lateRankCols } from "../views/distributed/LateArrivals";
import { rankCols } from "../views/distributed/Ranks";
import { Details } from "../views/trace/Details";
import { axisTooltip, pieTooltip } from "./Chart";
import { DataTable, type Col } from "./DataTable";
import { KeyValues, Notes } from "./common";

const RLO = "\u202E";
const EVIL = `void gemm${RLO}exe.kernel`;
const SHOWN = "void gemm⟨U+202E⟩exe.kernel";

/** Every text of the element shows no raw bidi control. */
function noRawControls(el: Element) {
  expect(el.textContent).not.toMatch(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/);
}

describe("canvas labels", () => {
  it("show the controls as markers (fillText cannot isolate)", () => {
    expect(canvasLabel(EVIL, 100)).toBe(SHOWN);
    expect(canvasLabel(`a\u2067b\u2069c\u200Fd\u061C`, 100)).toBe("a⟨U+2067⟩b⟨U+2069⟩c⟨U+200F⟩d⟨U+061C⟩");
  });
  it("cut to the room with an ellipsis, never inside a marker or a surrogate pair", () => {
    expect(canvasLabel("abcdefgh", 5)).toBe("abcd…");
    // "void gemm" is 9 characters: a marker that does not fit whole is left out
    expect(canvasLabel(EVIL, 14)).toBe("void gemm…");
    expect(canvasLabel(EVIL, 18)).toBe("void gemm⟨U+202E⟩…");
    expect(Array.from(canvasLabel("😀😀😀😀", 3))).toEqual(["😀", "😀", "…"]);
    for (let n = 2; n < 30; n++) {
      const s = canvasLabel(EVIL, n);
      expect(Array.from(s).length).toBeLessThanOrEqual(n);
      expect(s).not.toContain(RLO);
    }
  });
});

describe("HTML tooltips", () => {
  it("isolate names and show their controls, escaped", () => {
    expect(nameHtml(`<b>${RLO}</b>`)).toBe("<bdi>&lt;b&gt;⟨U+202E⟩&lt;/b&gt;</bdi>");
    expect(tooltipLine("#888", EVIL, "1 ms")).toContain(`<bdi>${SHOWN}</bdi>`);
    expect(pieTooltip(String)({ name: EVIL, value: 1, percent: 50 })).toContain(`<bdi>${SHOWN}</bdi>`);
    expect(axisTooltip(String)([{ axisValueLabel: EVIL, seriesName: "s", value: 1 }])).toContain(`<bdi>${SHOWN}</bdi>`);
  });
  it("the Diff charts: tooltips and axis labels", () => {
    const rows = [{ side: "both" as const, name: EVIL, host_self_ns_a: 10, host_self_ns_b: 30, host_self_ns_delta: 20 }];
    const c = deltaChart(rows, "host_self_ns", (r) => String(r.name));
    const tip = c.option.tooltip.formatter({ dataIndex: 0, color: "#888" });
    expect(tip).toContain(`<bdi>${SHOWN}</bdi>`);
    expect(tip).not.toContain(RLO);
    expect(c.option.yAxis.data[0]).toBe(SHOWN);
    const b = breakdownChart([{ category: "x", label: EVIL, time_ns_a: 1, time_ns_b: 2, time_ns_delta: 1, delta_pct: 1 }]);
    expect(b.option.tooltip.formatter([{ dataIndex: 0 }])).toContain(`<bdi>${SHOWN}</bdi>`);
    expect(b.option.yAxis.data[0]).toBe(SHOWN);
  });
  it("the Distributed charts: a worker's name", () => {
    const late = [{ rank: 0, worker: EVIL, instances: 1, last: 1, last_share: 1, late_ns: 1, late_per_step_ns: 1, late_max_ns: 1, worst_step: 1, worst_step_late_ns: 1 }];
    const tip = (lateBarsOption(late, 1, false).tooltip.formatter as (p: unknown) => string)([{ dataIndex: 0 }]);
    expect(tip).toContain(`<bdi>${SHOWN}</bdi>`);
  });
});

describe("the Trace view's details panel", () => {
  it("isolates the event's name, category, process, thread, linked names and arguments", () => {
    const d: EventDetailReply = {
      origin_ns: null,
      event: { i: 1, name: EVIL, cat: `kernel${RLO}`, ts_ns: 1000, dur_ns: 500, pid: `proc${RLO}`, tid: `stream${RLO}7`, track: 0, depth: 0 },
      args: { [`key${RLO}`]: `value${RLO}`, "Input Dims": [[1, 2]] },
      links: [{ i: 2, relation: "launched_by", name: `cudaLaunch${RLO}Kernel`, cat: `cuda_runtime${RLO}` }],
    };
    const el = mount(<Details d={d} onPick={() => {}} onZoom={() => {}} />);
    noRawControls(el);
    expect(el.querySelector(".details-name bdi")?.textContent).toBe(SHOWN);
    for (const text of ["kernel⟨U+202E⟩", "proc⟨U+202E⟩", "stream⟨U+202E⟩7", "cudaLaunch⟨U+202E⟩Kernel", "key⟨U+202E⟩", "value⟨U+202E⟩"]) {
      const bdi = Array.from(el.querySelectorAll("bdi")).find((b) => b.textContent === text);
      expect(bdi, text).toBeDefined();
      expect(bdi!.querySelector(".bidi-ctl"), text).not.toBeNull();
    }
    expect(el.querySelector("button.link")?.getAttribute("title")).toBe("cuda_runtime⟨U+202E⟩");
  });
});

describe("custom cells, key/value lists and notes", () => {
  function cellOf<T>(cols: Col<T>[], row: T, id: string): Element {
    const el = mount(<DataTable rows={[row]} cols={cols.filter((c) => c.id === id)} />);
    return el.querySelector("td")!;
  }
  it("the Distributed tables' worker cells", () => {
    const rank = {
      rank: 0, worker: EVIL, steps: 1, step_ns: 1, computation_ns: 1, communication_ns: 1, overlap_ns: 0, other_ns: 0, wait_ns: 0,
      transfer_ns: 0, clock_offset_ns: 0, clock_method: null, outlier: false, outlier_reason: null,
    };
    const late = { rank: 0, worker: EVIL, instances: 1, last: 1, last_share: 1, late_ns: 1, late_per_step_ns: 1, late_max_ns: 1, worst_step: 1, worst_step_late_ns: 1 };
    const cells = [
      cellOf(rankCols(), rank, "worker"),
      cellOf(lateRankCols(), late, "worker"),
      cellOf(figureCols(false, "total") as Col<any>[], { ...rank, wait_ns: 0, transfer_ns: 0 }, "worker"),
    ];
    for (const td of cells) {
      noRawControls(td);
      expect(td.querySelector("bdi")?.textContent).toBe(SHOWN);
      expect(td.querySelector(".bidi-ctl")).not.toBeNull();
    }
  });
  it("key/value lists, notes and recommendations", () => {
    const rec = { id: "r", severity: "warning", title: `Slow ${EVIL}`, text: `${EVIL} takes most of the step`, url: null };
    const el = mount(<><KeyValues items={[["Category", EVIL]]} /><Notes notes={[`no ${EVIL} here`]} /><RecommendationList recs={[rec as any]} /></>);
    expect(el.querySelector(".rec-text bdi")?.textContent).toBe(`${SHOWN} takes most of the step`);
    expect(el.querySelector(".rec-title bdi")?.textContent).toBe(`Slow ${SHOWN}`);
    noRawControls(el);
    expect(el.querySelector(".kv bdi")?.textContent).toBe(SHOWN);
    expect(el.querySelector(".notes bdi")?.textContent).toBe(`no ${SHOWN} here`);
    expect(showBidiControls(EVIL)).toBe(SHOWN);
  });
});
