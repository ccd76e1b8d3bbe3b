// Python frames written by the profiler as text: "path/to/file.py(123): func", and
// PyTorch 1.8-1.10's "Call stack" argument, such frames joined by ";" (innermost
// first). The same rule as the backend's analysis/stacks.py.

import type { Frame } from "../api/types";

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

/**
 * A frame as the API gives it: `path` is the absolute path of the recorded `file` on the
 * server's machine, present only where the server found that file (docs/api.md, "Stack
 * frames"). `file` stays as recorded (torch 2.x: relative to a sys.path entry).
 */
export type SourceFrame = Frame & { path?: string | null };

/** The file to open in VS Code or to copy: the resolved absolute path, else the text as recorded. */
export function openableFile(f: SourceFrame): string | null {
  return typeof f.path === "string" && f.path ? f.path : f.file;
}
