// "Jump to source" inside VS Code's TensorBoard panel.
//
// What the integration accepts (microsoft/vscode-tensorboard, src/tensorBoardSession.ts,
// and vscode-python's tensorBoardSession.ts before it): the webview page that frames
// TensorBoard listens for window "message" events and forwards one only when
//   - event.origin is a prefix of the TensorBoard URL (the sender is a TensorBoard frame),
//   - event.data.filename and event.data.line are both truthy;
// then it opens `filename` (or asks the user to locate it) and, only when
// `line < document.lineCount`, selects `new Position(line, 0)`: `line` is a 0-BASED
// VS Code line index. The listener is on the webview page, which is
// window.parent.parent of a TensorBoard plugin iframe (plugin iframe -> TensorBoard
// page -> webview page), where the old plugin posted {filename, line}.
//
// Python frames carry 1-based lines, so we send line - 1. A frame on line 1 would send
// 0, which the truthiness check drops (the click did nothing in the old plugin). For
// line 1 we send LINE_ONE instead: a truthy line that fails `line < lineCount`, so the
// integration opens the file and leaves the cursor where a freshly opened file has it,
// on line 1, instead of dropping the message or selecting a wrong line.
//
// `filename` must be a path VS Code can open: torch 2.x records frames relative to a
// sys.path entry ("cnn.py"), so callers pass the absolute path the server resolved
// (the API frame's `path`, util/frames openableFile) and only fall back to the recorded
// text, which makes VS Code ask the user to locate the file.

export const LINE_ONE = 2147483647;

export interface JumpMessage {
  filename: string;
  line: number;
}

/** The message for a frame with a 1-based line; null when it cannot be opened. */
export function buildJumpMessage(
  file: string | null | undefined,
  line: number | null | undefined,
): JumpMessage | null {
  if (!file || typeof file !== "string") return null;
  if (typeof line !== "number" || !Number.isInteger(line) || line < 1) return null;
  if (file.startsWith("<")) return null; // <string>, <frozen ...>, <built-in ...>
  return { filename: file, line: line === 1 ? LINE_ONE : line - 1 };
}

function isVsCodeWebviewOrigin(origin: string): boolean {
  // Desktop: vscode-webview://<id>; browser-based VS Code (vscode.dev, Codespaces,
  // code-server): https://<id>.vscode-cdn.net and similar.
  return (
    origin.startsWith("vscode-webview:") ||
    /^https:\/\/[^/]+\.vscode-cdn\.net$/.test(origin) ||
    /^https:\/\/[^/]+\.vscode-webview\.net$/.test(origin) ||
    origin.startsWith("vscode-file:")
  );
}

export interface VsCodeTarget {
  /** How many .parent hops from this window to the listening webview page. */
  hops: number;
  origin: string;
}

/**
 * Where to post: the nearest ancestor whose origin is a VS Code webview, from
 * location.ancestorOrigins (Chromium, which VS Code is; elsewhere null, and we are then
 * not in VS Code). The webview page is the nearest such ancestor: in TensorBoard it is
 * two hops up, standalone (`tb-profiler serve` framed by a webview) one hop.
 */
export function findVsCodeTarget(ancestorOrigins: ArrayLike<string> | null | undefined): VsCodeTarget | null {
  if (!ancestorOrigins) return null;
  for (let i = 0; i < ancestorOrigins.length; i++) {
    const o = ancestorOrigins[i];
    if (o && isVsCodeWebviewOrigin(o)) {
      if (o.startsWith("vscode-file:")) return null; // the workbench itself: no listener
      return { hops: i + 1, origin: o };
    }
  }
  return null;
}

let cached: VsCodeTarget | null | undefined;

export function vsCodeTarget(): VsCodeTarget | null {
  if (cached === undefined) {
    try {
      cached = findVsCodeTarget(window.location.ancestorOrigins);
    } catch {
      cached = null;
    }
  }
  return cached;
}

/** Posts the jump message; false when not inside VS Code or the frame has no file/line. */
export function jumpToSource(file: string | null | undefined, line: number | null | undefined): boolean {
  const target = vsCodeTarget();
  const msg = buildJumpMessage(file, line);
  if (!target || !msg) return false;
  let w: Window = window;
  for (let i = 0; i < target.hops; i++) w = w.parent;
  // Exact target origin: the message (a file path) goes to the webview page only.
  w.postMessage(msg, target.origin);
  return true;
}

/** "file:line" as shown and copied outside VS Code. */
export function frameLocation(file: string | null | undefined, line: number | null | undefined): string {
  if (!file) return "";
  return line ? `${file}:${line}` : file;
}
