// @vitest-environment jsdom
// Untrusted names (events, kernels, operators, files) render as text, never as HTML.
import { describe, expect, it } from "vitest";
import { DataTable } from "./DataTable";
import { StackFrames } from "./StackFrames";
import { mount } from "../testing/mount";


const EVIL = `<img src=x onerror="window.__pwned=1">`;

describe("untrusted text", () => {
  it("stack frames show file:line as text", () => {
    const el = mount(<StackFrames frames={[{ file: `${EVIL}.py`, line: 3, func: `<script>alert(1)</script>` }]} />);
    expect(el.querySelector("img")).toBeNull();
    expect(el.querySelector("script")).toBeNull();
    expect(el.textContent).toContain(`${EVIL}.py:3`);
    expect(el.textContent).toContain("<script>alert(1)</script>");
  });
  it("table cells show names as text", () => {
    const el = mount(
      <DataTable
        rows={[{ name: EVIL, calls: 2 }]}
        cols={[
          { id: "name", header: "Name", value: (r: { name: string }) => r.name },
          { id: "calls", header: "Calls", value: (r: { calls: number }) => r.calls, kind: "count" },
        ]}
      />,
    );
    expect(el.querySelector("img")).toBeNull();
    expect(el.textContent).toContain(EVIL);
    expect((globalThis as { __pwned?: number }).__pwned).toBeUndefined();
  });
});
