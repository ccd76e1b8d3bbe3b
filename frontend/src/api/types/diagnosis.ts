// The Overview's diagnosis (tb_profiler/analysis/diagnosis.py): what bounds the step, in one
// sentence made once on the server (the CLI's `why` verdict says the same words).

export type BoundBy = "host" | "waits" | "kernel" | "memcpy" | "memset" | "communication" | "none";

export interface Diagnosis {
  bound_by: BoundBy;
  label: string;          // "Host", "Device compute", ...
  sentence: string;
  figures: {
    step_ns?: number;
    device?: number | null;
    idle_pct?: number | null;
    host_wait_pct_of_idle?: number | null;
    largest?: { category: string; label: string; ns_per_step: number; pct: number };
  };
  evidence: {
    view?: string;
    section?: string | null;
    time_range_ns?: [number, number] | null;
    event_ids?: number[]; // the longest events of the cost named, longest first (trace rows)
    step?: number | null; // the step of the first
  };
}
