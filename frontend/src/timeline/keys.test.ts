// The timeline's keys: the cursor keys (brackets, Shift+arrows) do not take the plain arrows'
// pan and scroll, a modifier leaves brackets and Enter to the browser, Escape clears one thing
// at a time; and every key the timeline acts on is listed in the "?" overlay.
import { describe, expect, it } from "vitest";
import { KEYS } from "../views/trace/Keys";
import { escapeTarget, keyAction } from "./keys";

const key = (k: string, mods: { shiftKey?: boolean; ctrlKey?: boolean; altKey?: boolean; metaKey?: boolean } = {}) =>
  keyAction({ key: k, shiftKey: false, ...mods });

describe("keyAction", () => {
  it("moves the cursor with brackets and Shift+arrows", () => {
    expect(key("]")).toEqual({ kind: "cursor", dir: "next" });
    expect(key("[")).toEqual({ kind: "cursor", dir: "prev" });
    expect(key("ArrowRight", { shiftKey: true })).toEqual({ kind: "cursor", dir: "next" });
    expect(key("ArrowLeft", { shiftKey: true })).toEqual({ kind: "cursor", dir: "prev" });
    expect(key("ArrowUp", { shiftKey: true })).toEqual({ kind: "cursor", dir: "up" });
    expect(key("ArrowDown", { shiftKey: true })).toEqual({ kind: "cursor", dir: "down" });
    expect(key("Enter")).toEqual({ kind: "open" });
  });

  it("keeps the plain arrows and WASD panning, zooming and scrolling", () => {
    expect(key("ArrowRight")).toEqual({ kind: "pan", frac: -0.2 });
    expect(key("a")).toEqual({ kind: "pan", frac: 0.2 });
    expect(key("W")).toEqual({ kind: "zoom", factor: 1.5 });
    expect(key("-")).toEqual({ kind: "zoom", factor: 1 / 1.5 });
    expect(key("ArrowDown")).toEqual({ kind: "scroll", dy: 60 });
    expect(key("0")).toEqual({ kind: "whole" });
    expect(key("Escape")).toEqual({ kind: "escape" });
  });

  it("leaves other keys and modified brackets / Enter alone", () => {
    expect(key("x")).toBeNull();
    expect(key("/")).toBeNull(); // the view's search key
    expect(key("n")).toBeNull(); // the view's next match
    expect(key("]", { ctrlKey: true })).toBeNull();
    expect(key("Enter", { altKey: true })).toBeNull();
    expect(key("ArrowLeft", { shiftKey: true, altKey: true })).toEqual({ kind: "pan", frac: 0.2 });
  });
});

describe("escapeTarget", () => {
  it("clears the range, then the selection, then the cursor", () => {
    expect(escapeTarget(true, true, true)).toBe("range");
    expect(escapeTarget(false, true, true)).toBe("selection");
    expect(escapeTarget(false, false, true)).toBe("cursor");
    expect(escapeTarget(false, false, false)).toBeNull();
  });
});

describe("the ? overlay", () => {
  it("lists the cursor keys", () => {
    const listed = KEYS.map(([k]) => k).join(" ");
    for (const k of ["]", "[", "Shift+→", "Shift+←", "Shift+↑", "Shift+↓", "Enter", "Escape"]) expect(listed).toContain(k);
  });
});
