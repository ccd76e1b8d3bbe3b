// The Trace view's keyboard: "/" puts the cursor in the search box, n / N step through the
// matches, "?" opens the list of every key (the timeline's own keys included), Escape
// closes it. Keys typed into a field are the field's.

import { useEffect, useState, type RefObject } from "react";

export const KEYS: [string, string][] = [
  ["W / S, + / −, Ctrl+wheel", "zoom in / out at the pointer"],
  ["A / D, ← / →, drag", "pan"],
  ["↑ / ↓", "scroll the tracks"],
  ["0", "the whole trace"],
  ["Shift+drag", "zoom to a range"],
  ["drag on the time ruler", "select a range (its statistics open)"],
  ["click an event", "its details"],
  ["] / [, Shift+→ / Shift+←", "next / previous event on the row (the timeline focused; the first in view if none is picked)"],
  ["Shift+↑ / Shift+↓", "the event in the row above (its parent) / below (its first child)"],
  ["Enter", "details of the event under the keyboard cursor"],
  ["Escape", "clear the range, then the details, then the keyboard cursor"],
  ["Tab", "focus the timeline (a ring shows it) or the range box: step 17 +100ms..+110ms, Enter selects it"],
  ["/", "search events by name"],
  ["Enter / Shift+Enter in the search box, n / N", "next / previous match"],
  ["?", "this list"],
];

function typing(t: EventTarget | null): boolean {
  const el = t as HTMLElement | null;
  return !!el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
}

/** Installs the view's keys; returns whether the key list is open and a setter. */
export function useTraceKeys(search: RefObject<HTMLInputElement | null>, step: (delta: number) => void): [boolean, (v: boolean) => void] {
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (e.key === "Escape" && open) { setOpen(false); return; }
      if (typing(e.target)) return;
      if (e.key === "/") { e.preventDefault(); search.current?.focus(); search.current?.select(); }
      else if (e.key === "?") { e.preventDefault(); setOpen((v) => !v); }
      else if (e.key === "n") step(1);
      else if (e.key === "N") step(-1);
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [open, search, step]);
  return [open, setOpen];
}

export function KeysOverlay({ onClose }: { onClose: () => void }) {
  return (
    <div className="keys-overlay" role="dialog" aria-modal="true" aria-label="Keyboard shortcuts" onClick={onClose}>
      <div className="card keys-card" onClick={(e) => e.stopPropagation()}>
        <header className="card-head">
          <h2>Keyboard shortcuts</h2>
          <button type="button" className="icon-btn" aria-label="Close" onClick={onClose} autoFocus>✕</button>
        </header>
        <table className="keys">
          <tbody>
            {KEYS.map(([k, what]) => (
              <tr key={k}><th scope="row"><kbd>{k}</kbd></th><td>{what}</td></tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
