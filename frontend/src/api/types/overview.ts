// Reply of `GET overview` (docs/api.md): steps, step-time breakdown, devices, recommendations.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

import type { Diagnosis } from "./diagnosis";

export interface Step {
  step: number;
  name: string;
  start_ns: number;
  end_ns: number;
  host_start_ns?: number;
  host_end_ns?: number;
  dur_ns: number;
  device_events?: number;
  event?: number;
}

export type BreakdownRow = { step: number; name: string } & Record<string, number | string | null>;

export interface DeviceRow {
  device: number;
  word: string;
  name: string | null;
  memory_bytes: number | null;
  compute_capability: string | null;
  num_sms: number | null;
  kernels: number;
  kernel_ns: number;
  busy_ns: number;
  window_ns: number;
  utilization_pct: number | null;
  sm_efficiency_pct: number | null;
  occupancy_pct: number | null;
  tensor_core_pct: number | null;
}

export interface Recommendation {
  id: string;
  severity: "info" | "warning" | "critical" | string;
  title: string;
  text: string;
  evidence?: Record<string, unknown>;
  url?: string | null;
  /** where its evidence is seen: a view and the table filter (q) or kernel grouping that shows it */
  link?: { view?: string; q?: string; kgroup?: string; find?: string };
}

export interface OverviewReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  device_word: string; // "GPU", "XPU", ...; "CPU" on a CPU-only trace
  device_kinds: string[]; // the trace's backends ("CUDA", "ROCm", "XPU", ...); [] on a CPU-only trace
  matrix_unit?: string | null; // "Tensor cores", "Matrix cores" (AMD); null where kernel names do not tell
  environments: { title: string; value: string }[];
  steps: Step[];
  breakdown: { labels: Record<string, string>; ns: BreakdownRow[]; pct: BreakdownRow[] };
  devices: DeviceRow[];
  recommendations: Recommendation[];
  diagnosis?: Diagnosis;
  summary: {
    num_steps: number;
    step_time_avg_ns: number | null;
    steps_span_ns: number | null;
    dropped_steps: number;
    whole_trace_step: boolean;
    average_ns: Record<string, number>;
    average_pct: Record<string, number>;
    utilization_pct: Record<string, number | null>;
  };
  notes: string[];
}
