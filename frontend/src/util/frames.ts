// Python frames written by the profiler as text: "path/to/file.py(123): func", and
// PyTorch 1.8-1.10's "Call stack" argument, such frames joined by ";" (innermost
// first). The same rule as the backend's analysis/stacks.py.

import type { Frame, SourceFrame } from "../api/types/frames";

const FRAME = /^(.*?)\((\d+)\): ([\s\S]*)$/;

export function parseFrame(text: string): Frame {
  const t = text.trim();
  const m = FRAME.exec(t);
  if (!m) return { file: null, line: null, func: t };
  return { file: m[1], line: Number(m[2]), func: m[3] };
}

export function parseCallStack(stack: string): Frame[] {
  return stack
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean)
    .map(parseFrame);
}

/** Whether a trace event argument holds Python frames worth rendering as a stack. */
export function isStackArg(key: string, value: unknown): value is string {
  return typeof value === "string" && /^(call stack|python stack|stack)$/i.test(key) && FRAME.test(value.split(";")[0].trim());
}

/** The file to open in VS Code or to copy: the resolved absolute path, else the text as recorded. */
export function openableFile(f: SourceFrame): string | null {
  return typeof f.path === "string" && f.path ? f.path : f.file;
}

// Library code: installed packages (site-/dist-packages), torch itself (torch 2.x records a
// file relative to its sys.path entry: "torch/nn/modules/conv.py"), the Python standard
// library, and frames with no file (built-in methods).
const LIBRARY = /(^|\/)(site|dist)-packages\/|^torch\/|\/lib\/python\d+(\.\d+)?\/|^<frozen /;

/** Whether a frame is library code rather than the user's own (dimmed; skipped when folded). */
export function isLibraryFrame(f: Frame): boolean {
  return !f.file || LIBRARY.test(f.file);
}

/** A file as shown: an installed package's path from the package on ("…/site-packages/torch/nn/x.py" -> "torch/nn/x.py"). */
export function shortFile(file: string): string {
  const m = /(?:site|dist)-packages\/(.+)$/.exec(file);
  return m ? m[1] : file;
}

/** The frame a folded stack shows: the innermost of the user's own code (cnn.py:51, not
 * torch/nn/modules/conv.py:546), else the innermost with a file, else the first. */
export function foldedFrame<T extends Frame>(frames: T[]): T | undefined {
  return frames.find((f) => f.file && !isLibraryFrame(f)) ?? frames.find((f) => f.file) ?? frames[0];
}
