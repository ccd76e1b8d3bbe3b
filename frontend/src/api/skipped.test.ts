// The "N files skipped" badge counts each file once (api/skipped).
import { describe, expect, it } from "vitest";
import type { StatusReply } from "./types/status";
import { skippedFiles } from "./skipped";

const broken = (span: string) => ({ span, suffix: ".pt.trace.json", size: 10, state: "failed" as const, error: "not JSON" });

describe("skippedFiles", () => {
  it("a file that failed to load is counted once, not again from its run's workers", () => {
    // two broken traces beside a good one: the server lists both under `skipped` and
    // again as failed files of the run
    const status: StatusReply = {
      loading: false, scanned_at: 1, total_bytes: 30, loaded_bytes: 30,
      runs: [{
        name: "run", state: "ready", total_bytes: 30, loaded_bytes: 30, files: 3, loaded_files: 1, failed_files: 2,
        workers: {
          good: [{ span: "1", suffix: ".pt.trace.json", size: 10, state: "loaded", error: null }],
          bad1: [broken("1")],
          bad2: [broken("1")],
        },
      }],
      skipped: [
        { path: "run/bad1.1.pt.trace.json", reason: "not JSON" },
        { path: "run/bad2.1.pt.trace.json", reason: "not JSON" },
      ],
    };
    expect(skippedFiles(status).map((s) => s.path)).toEqual(["run/bad1.1.pt.trace.json", "run/bad2.1.pt.trace.json"]);
  });
  it("one path named twice is one file", () => {
    const s = { path: "r/w.json", reason: "x" };
    expect(skippedFiles({ skipped: [s, { ...s, reason: "y" }] })).toHaveLength(1);
    expect(skippedFiles({ skipped: [] })).toEqual([]);
  });
});
