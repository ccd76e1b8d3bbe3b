// Untrusted text (event, kernel, operator, module and file names) meets HTML in exactly
// one place: ECharts' HTML tooltips, whose formatters return markup. Everything that
// goes into such a string goes through escapeHtml. React renders text nodes everywhere
// else, so nothing else needs it.

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

/** A tooltip line: a color dot, an escaped label and an escaped value. */
export function tooltipLine(color: string, label: unknown, value: unknown): string {
  const safeColor = /^#[0-9a-fA-F]{3,8}$|^rgba?\([\d\s.,%]+\)$/.test(color) ? color : "#888";
  return (
    `<span style="display:inline-block;width:8px;height:8px;border-radius:4px;` +
    `background:${safeColor};margin-right:6px"></span>` +
    `${escapeHtml(label)}: <b>${escapeHtml(value)}</b>`
  );
}
