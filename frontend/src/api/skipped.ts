// The files the header's "N files skipped" badge counts and lists.

import type { StatusReply } from "./types/status";

export interface SkippedFile {
  path: string;
  reason: string;
}

/**
 * Each file that could not be used, once: the server's `skipped` names every one (found
 * but unreadable, failed to load, or not summarized). A file that failed to load is also
 * in its run's `workers` (state "failed"): that is the same file, not one more, so it is
 * not added again (the badge once said "4 files skipped" for 2 broken files).
 */
export function skippedFiles(status: Pick<StatusReply, "skipped">): SkippedFile[] {
  const seen = new Set<string>();
  const out: SkippedFile[] = [];
  for (const s of status.skipped ?? []) {
    if (seen.has(s.path)) continue;
    seen.add(s.path);
    out.push(s);
  }
  return out;
}
