// The timeline canvas's keys, as actions (the Timeline carries them out): zoom (W/S, +/-),
// pan (A/D, ←/→), scroll the tracks (↑/↓), the whole trace (0), the keyboard cursor over
// events (] / [ or Shift+→ / Shift+←: next / previous on its row; Shift+↑ / Shift+↓: the row
// above, its parent, / below, its first child), Enter (the cursor's details) and Escape.
// The cursor keys are brackets and Shift+arrows so that the plain arrows keep panning and
// scrolling as before. Views/trace/Keys lists them all in the "?" overlay.

import type { NavDir } from "./eventNav";

export type KeyAction =
  | { kind: "zoom"; factor: number }
  /** pan by this fraction of the canvas's width (positive: show earlier time) */
  | { kind: "pan"; frac: number }
  | { kind: "scroll"; dy: number }
  | { kind: "whole" }
  | { kind: "cursor"; dir: NavDir }
  | { kind: "open" }
  | { kind: "escape" };

/** What the pressed key does on the timeline, or null (the key is not the timeline's). */
export function keyAction(e: { key: string; shiftKey: boolean; ctrlKey?: boolean; metaKey?: boolean; altKey?: boolean }): KeyAction | null {
  const k = e.key.toLowerCase();
  if (e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) {
    if (k === "arrowright") return { kind: "cursor", dir: "next" };
    if (k === "arrowleft") return { kind: "cursor", dir: "prev" };
    if (k === "arrowup") return { kind: "cursor", dir: "up" };
    if (k === "arrowdown") return { kind: "cursor", dir: "down" };
  }
  // brackets and Enter with a modifier are the browser's or the system's
  if (!e.ctrlKey && !e.metaKey && !e.altKey) {
    if (k === "]") return { kind: "cursor", dir: "next" };
    if (k === "[") return { kind: "cursor", dir: "prev" };
    if (k === "enter") return { kind: "open" };
  }
  if (k === "w" || k === "+" || k === "=") return { kind: "zoom", factor: 1.5 };
  if (k === "s" || k === "-" || k === "_") return { kind: "zoom", factor: 1 / 1.5 };
  if (k === "a" || k === "arrowleft") return { kind: "pan", frac: 0.2 };
  if (k === "d" || k === "arrowright") return { kind: "pan", frac: -0.2 };
  if (k === "arrowup") return { kind: "scroll", dy: -60 };
  if (k === "arrowdown") return { kind: "scroll", dy: 60 };
  if (k === "0") return { kind: "whole" };
  if (k === "escape") return { kind: "escape" };
  return null;
}

/** What Escape clears, one thing per press: the range, then the details (the selection), then the cursor. */
export function escapeTarget(hasRange: boolean, hasSelection: boolean, hasCursor: boolean): "range" | "selection" | "cursor" | null {
  if (hasRange) return "range";
  if (hasSelection) return "selection";
  if (hasCursor) return "cursor";
  return null;
}
