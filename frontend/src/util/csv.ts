// CSV export of a table as shown (filtered and sorted), RFC 4180: fields holding a
// comma, a quote, CR or LF are quoted and quotes doubled; lines end with CRLF.
// Names are untrusted: a text cell that a spreadsheet would read as a formula
// (leading = + - @ TAB CR) is prefixed with an apostrophe. Numbers stay numbers
// (so "-5" written from a number is not touched).

export type CsvCell = string | number | boolean | null | undefined;

const FORMULA_START = /^[=+\-@\t\r]/;

export function csvField(v: CsvCell): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : "";
  if (typeof v === "boolean") return v ? "true" : "false";
  let s = String(v);
  if (FORMULA_START.test(s)) s = "'" + s;
  if (/[",\r\n]/.test(s) || s.startsWith(" ") || s.endsWith(" ")) {
    s = '"' + s.replace(/"/g, '""') + '"';
  }
  return s;
}

export function toCsv(headers: string[], rows: CsvCell[][]): string {
  const lines = [headers.map(csvField).join(",")];
  for (const r of rows) lines.push(r.map(csvField).join(","));
  return lines.join("\r\n") + "\r\n";
}

/** A file name from untrusted parts: letters, digits, dot, dash, underscore only. */
export function csvFileName(...parts: (string | undefined | null)[]): string {
  const base = parts
    .filter((p): p is string => !!p)
    .map((p) => p.replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^[._-]+|[._-]+$/g, ""))
    .filter(Boolean)
    .join("-");
  return (base || "table").slice(0, 150) + ".csv";
}

/**
 * The file name of a table's export: the view it comes from (unless a part already starts
 * with its name: "operators" in the Operator view), the table's own parts (run, worker,
 * span, table), and "filtered" when the rows are only those a filter kept -- a file opened
 * later says where it came from and that it is not the whole table.
 */
export function tableFileName(parts: readonly (string | undefined | null)[], view: string | undefined, filtered: boolean): string {
  const names = parts.filter((p): p is string => !!p);
  const v = view && !names.some((p) => p.toLowerCase().startsWith(view.toLowerCase())) ? [view] : [];
  return csvFileName(...v, ...names, filtered ? "filtered" : null);
}

/**
 * Saves text as a file. Inside sandboxed frames without allow-downloads (VS Code's
 * webview) the download is silently blocked; the table also offers "Copy".
 */
export function downloadText(filename: string, text: string, mime = "text/csv;charset=utf-8"): void {
  // A BOM makes spreadsheet programs read UTF-8 names correctly.
  const blob = new Blob(["\ufeff", text], { type: mime });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.rel = "noopener";
  a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** Copies text to the clipboard, with the execCommand fallback frames may need. */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the textarea method
  }
  try {
    const ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.appendChild(ta);
    ta.select();
    const ok = document.execCommand("copy");
    ta.remove();
    return ok;
  } catch {
    return false;
  }
}
