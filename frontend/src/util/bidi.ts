// Bidirectional-control characters (U+202A..U+202E, U+2066..U+2069, U+200E/F, U+061C) in
// untrusted names and paths: shown as visible markers ("⟨U+202E⟩") so that a name cannot
// display reversed or make a path look like another; the element around each name also
// isolates it (components/Name: <bdi>) so that right-to-left text in it cannot reorder the
// text beside it. The raw name is kept everywhere else (filters, CSV, requests).

// eslint-disable-next-line no-control-regex
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

export function hasBidiControls(s: string): boolean {
  BIDI.lastIndex = 0;
  const r = BIDI.test(s);
  BIDI.lastIndex = 0;
  return r;
}

export function bidiMarker(c: string): string {
  return `⟨U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}⟩`;
}

/** The text with every bidi control replaced by its visible marker (for canvas labels,
 * <option>s and titles, which cannot hold an isolating element). */
export function showBidiControls(s: string): string {
  return s.replace(BIDI, bidiMarker);
}

/** The text split into plain parts and bidi controls (for rendering the controls apart). */
export function splitBidi(s: string): { text: string; control: boolean }[] {
  const out: { text: string; control: boolean }[] = [];
  let last = 0;
  for (const m of s.matchAll(BIDI)) {
    if (m.index! > last) out.push({ text: s.slice(last, m.index), control: false });
    out.push({ text: m[0], control: true });
    last = m.index! + m[0].length;
  }
  if (last < s.length) out.push({ text: s.slice(last), control: false });
  return out;
}

/**
 * A name as text drawn on a canvas (fillText: no element can isolate it), at most `max`
 * characters: its bidi controls shown as markers, so that a U+202E cannot draw the label
 * reversed; a longer one cut with "…" between characters, never inside a marker.
 */
export function canvasLabel(s: string, max: number): string {
  const shown = showBidiControls(s);
  if (Array.from(shown).length <= max) return shown;
  const budget = Math.max(0, max - 1);
  let out = "";
  let n = 0;
  for (const p of splitBidi(s)) {
    const chars = Array.from(p.control ? bidiMarker(p.text) : p.text);
    if (p.control) {
      if (n + chars.length > budget) break;
      out += chars.join("");
      n += chars.length;
      continue;
    }
    const take = Math.min(chars.length, budget - n);
    out += chars.slice(0, take).join("");
    n += take;
    if (take < chars.length) break;
  }
  return out + "…";
}
