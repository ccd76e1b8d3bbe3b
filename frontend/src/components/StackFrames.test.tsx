// @vitest-environment jsdom
// Frames show the recorded text; VS Code gets (and the copy button copies) the absolute
// path the server resolved, when there is one.
import { act } from "react";
import { createRoot } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { StackFrames } from "./StackFrames";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const env = vi.hoisted(() => ({ inside: false, jumps: [] as [unknown, unknown][], copies: [] as string[] }));

vi.mock("../util/vscode", async (original) => {
  const real = await original<typeof import("../util/vscode")>();
  return {
    ...real,
    vsCodeTarget: () => (env.inside ? { hops: 2, origin: "vscode-webview://x" } : null),
    jumpToSource: (file: unknown, line: unknown) => {
      env.jumps.push([file, line]);
      return true;
    },
  };
});

vi.mock("../util/csv", () => ({
  copyText: async (text: string) => {
    env.copies.push(text);
    return true;
  },
}));

const RESOLVED = { file: "cnn.py", line: 45, func: "forward", path: "/src/samples/cnn.py" };
const UNRESOLVED = { file: "ghost.py", line: 7, func: "f" };
let host: HTMLDivElement | null = null;

function mount(node: React.ReactNode): HTMLDivElement {
  host = document.createElement("div");
  document.body.appendChild(host);
  const root = createRoot(host);
  act(() => root.render(node));
  return host;
}

beforeEach(() => {
  env.jumps = [];
  env.copies = [];
});

afterEach(() => {
  host?.remove();
  host = null;
});

describe("StackFrames inside VS Code", () => {
  beforeEach(() => {
    env.inside = true;
  });
  it("shows the recorded text and opens the resolved path", () => {
    const el = mount(<StackFrames frames={[RESOLVED, UNRESOLVED]} />);
    const buttons = [...el.querySelectorAll("button.frame-loc")] as HTMLButtonElement[];
    expect(buttons.map((b) => b.textContent)).toEqual(["cnn.py:45", "ghost.py:7"]);
    expect(buttons[0].title).toBe("Open /src/samples/cnn.py:45 in VS Code");
    act(() => buttons[0].click());
    act(() => buttons[1].click());
    expect(env.jumps).toEqual([
      ["/src/samples/cnn.py", 45],
      ["ghost.py", 7],
    ]);
  });
});

describe("StackFrames outside VS Code", () => {
  beforeEach(() => {
    env.inside = false;
  });
  it("shows file:line as text and copies the resolved path", async () => {
    const el = mount(<StackFrames frames={[RESOLVED, UNRESOLVED]} />);
    expect(el.querySelectorAll("button.frame-loc").length).toBe(0);
    expect([...el.querySelectorAll("span.frame-loc")].map((s) => s.textContent)).toEqual(["cnn.py:45", "ghost.py:7"]);
    const copy = [...el.querySelectorAll("button.icon-btn")] as HTMLButtonElement[];
    expect(copy.map((b) => b.getAttribute("aria-label"))).toEqual(["Copy /src/samples/cnn.py:45", "Copy ghost.py:7"]);
    await act(async () => copy[0].click());
    expect(env.copies).toEqual(["/src/samples/cnn.py:45"]);
    expect(env.jumps).toEqual([]);
  });
});

describe("StackFrames of a backward op", () => {
  it("says the stack is its forward op's, over the frames", () => {
    const el = mount(<StackFrames frames={[RESOLVED]} from="forward op aten::convolution" />);
    expect(el.querySelector(".stack-from")?.textContent).toBe("Stack of its forward op aten::convolution");
    expect(el.querySelectorAll("li.frame").length).toBe(1);
    const own = mount(<StackFrames frames={[RESOLVED]} />);
    expect(own.querySelector(".stack-from")).toBeNull();
  });
});
