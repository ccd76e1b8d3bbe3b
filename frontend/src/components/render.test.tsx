// @vitest-environment jsdom
// Untrusted names (events, kernels, operators, files) render as text, never as HTML.
import { act } from "react";
import { createRoot } from "react-dom/client";
import { afterEach, describe, expect, it } from "vitest";
import { DataTable } from "./DataTable";
import { StackFrames } from "./StackFrames";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const EVIL = `<img src=x onerror="window.__pwned=1">`;
let host: HTMLDivElement | null = null;

function mount(node: React.ReactNode): HTMLDivElement {
  host = document.createElement("div");
  document.body.appendChild(host);
  const root = createRoot(host);
  act(() => root.render(node));
  return host;
}

afterEach(() => {
  host?.remove();
  host = null;
});

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
