// Replies of the discovery and loading routes (docs/api.md, "Discovery and status"): runs,
// status, skipped, and the 202 "still loading" reply any route may give.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

export interface LoadingReply {
  loading: true;
  /** an analysis is still running (no byte progress) */
  computing?: boolean;
  run?: string;
  loaded_bytes?: number;
  total_bytes?: number;
  run_loaded_bytes?: number;
  run_total_bytes?: number;
  /** run-level routes while the run's summaries are built: `summarized` of `total` files done, `failed` of them without one */
  summarizing?: boolean;
  summarized?: number;
  total?: number;
  failed?: number;
  retry_after_ms?: number;
}

export interface RunsReply {
  runs: string[];
  failed?: string[]; // runs whose every file failed: listed for their errors, never opened by default
  loading: boolean;
}

export interface StatusFile {
  span: string | null;
  suffix: string | null;
  size: number;
  state: "pending" | "loading" | "loaded" | "failed";
  error: string | null;
}

export interface StatusRun {
  name: string;
  state: "loading" | "ready" | "failed";
  total_bytes: number;
  loaded_bytes: number;
  files: number;
  loaded_files: number;
  failed_files: number;
  workers: Record<string, StatusFile[]>;
}

export interface StatusReply {
  loading: boolean;
  scanned_at: number | null;
  /** why the last scan of the log directory failed (it does not exist, ...), else null */
  scan_error?: string | null;
  total_bytes: number;
  loaded_bytes: number;
  runs: StatusRun[];
  skipped: { path: string; reason: string }[];
}

export interface SkippedReply {
  skipped: { run: string | null; path: string; reason: string }[];
}
