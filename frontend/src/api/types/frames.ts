// Python frames as the API gives them (docs/api.md, "Stack frames"); util/frames.ts parses
// and classifies them.

export interface Frame {
  file: string | null;
  line: number | null;
  func: string | null;
}

/**
 * A frame as the API gives it: `path` is the absolute path of the recorded `file` on the
 * server's machine, present only where the server found that file (docs/api.md, "Stack
 * frames"). `file` stays as recorded (torch 2.x: relative to a sys.path entry).
 */
export type SourceFrame = Frame & { path?: string | null };
