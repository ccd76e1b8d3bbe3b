// Reply of `GET diff` (docs/api.md, "Diff"): run A against run B.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

export type DiffRow = { side: "a" | "b" | "both"; name?: string; path?: string } & Record<string, unknown>;

/** One category of the step-time breakdown, ns per step of each side (null: that side has no steps). */
export interface DiffBreakdownRow {
  category: string;
  label: string;
  time_ns_a: number | null;
  time_ns_b: number | null;
  time_ns_delta: number | null;
  /** the delta as % of A's step time */
  delta_pct: number | null;
}

export interface DiffReply {
  /** largest |delta| first */
  breakdown: DiffBreakdownRow[];
  summary: {
    traces_a: number;
    traces_b: number;
    num_steps_a: number | null;
    num_steps_b: number | null;
    step_time_avg_ns_a: number | null;
    step_time_avg_ns_b: number | null;
    step_time_avg_ns_delta: number | null;
  };
  operators: DiffRow[];
  kernels: DiffRow[];
  modules: DiffRow[];
  notes: string[];
}
