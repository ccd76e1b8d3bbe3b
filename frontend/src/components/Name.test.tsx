// @vitest-environment jsdom
// Names and paths sit in an isolating element (<bdi>), their bidi controls shown as markers.
import { describe, expect, it } from "vitest";
import { DataTable } from "./DataTable";
import { Name } from "./Name";
import { StackFrames } from "./StackFrames";
import { Select } from "./common";
import { mount } from "../testing/mount";
import { showBidiControls, splitBidi } from "../util/bidi";

const RLO = "\u202E";
const EVIL = `aten::add${RLO}exe.txt`;

describe("bidi isolation", () => {
  it("a table's name cell is a <bdi> with the control shown", () => {
    const el = mount(
      <DataTable
        rows={[{ name: EVIL, calls: 2 }]}
        cols={[
          { id: "name", header: "Name", value: (r: { name: string }) => r.name },
          { id: "calls", header: "Calls", value: (r: { calls: number }) => r.calls, kind: "count" },
        ]}
      />,
    );
    const bdi = el.querySelector("td bdi");
    expect(bdi).not.toBeNull();
    expect(bdi!.textContent).toBe("aten::add⟨U+202E⟩exe.txt");
    expect(bdi!.textContent).not.toContain(RLO);
    expect(bdi!.querySelector(".bidi-ctl")).not.toBeNull();
  });
  it("plain names are isolated too", () => {
    const el = mount(<Name text="aten::mm" />);
    expect(el.querySelector("bdi")!.textContent).toBe("aten::mm");
  });
  it("stack frames' function and path are isolated", () => {
    const el = mount(<StackFrames frames={[{ file: `/home/u/${RLO}yp.evil`, line: 3, func: `f${RLO}oo` }]} />);
    const bdis = Array.from(el.querySelectorAll("bdi"));
    expect(bdis.map((b) => b.textContent)).toEqual(["f⟨U+202E⟩oo", "/home/u/⟨U+202E⟩yp.evil:3"]);
    expect(el.textContent).not.toContain(RLO);
  });
  it("run / worker pickers show the control as a marker, keep the value", () => {
    const run = `run${RLO}1`;
    const el = mount(<Select label="Run" value={run} options={[run]} onChange={() => {}} />);
    const opt = el.querySelector("option")!;
    expect(opt.textContent).toBe("run⟨U+202E⟩1");
    expect(opt.value).toBe(run);
  });
  it("splits and shows every kind of control", () => {
    expect(showBidiControls("a\u2066b\u2069c\u200F")).toBe("a⟨U+2066⟩b⟨U+2069⟩c⟨U+200F⟩");
    expect(splitBidi(`x${RLO}y`)).toEqual([{ text: "x", control: false }, { text: RLO, control: true }, { text: "y", control: false }]);
    expect(showBidiControls("עברית")).toBe("עברית");
  });
});
