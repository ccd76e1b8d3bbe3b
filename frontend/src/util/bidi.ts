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
