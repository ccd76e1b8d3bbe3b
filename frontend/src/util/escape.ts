// Untrusted text (event, kernel, operator, module and file names) meets HTML in exactly
// one place: ECharts' HTML tooltips, whose formatters return markup. Everything that
// goes into such a string goes through escapeHtml. React renders text nodes everywhere
// else, so nothing else needs it. Names (nameHtml) are also isolated in a <bdi> with their
// bidi controls shown as markers (util/bidi), as components/Name does in React.

import { showBidiControls } from "./bidi";

const MAP: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

export function escapeHtml(s: unknown): string {
  return String(s ?? "").replace(/[&<>"'`]/g, (c) => MAP[c]);
}

/** An untrusted name (or a label holding one) for HTML: escaped, its bidi controls shown
 * as visible markers, isolated in a <bdi>. */
export function nameHtml(s: unknown): string {
  return `<bdi>${escapeHtml(showBidiControls(String(s ?? "")))}</bdi>`;
}

/** A tooltip line: a color dot, an escaped label (a name: nameHtml) and an escaped value. */
export function tooltipLine(color: string, label: unknown, value: unknown): string {
  const safeColor = /^#[0-9a-fA-F]{3,8}$|^rgba?\([\d\s.,%]+\)$/.test(color) ? color : "#888";
  return (
    `<span style="display:inline-block;width:8px;height:8px;border-radius:4px;` +
    `background:${safeColor};margin-right:6px"></span>` +
    `${nameHtml(label)}: <b>${escapeHtml(value)}</b>`
  );
}
