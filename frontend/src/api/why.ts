// Replies of the "Why is the step slow" routes (docs/api.md): idle, launches,
// steps/outliers. Durations in exact integer ns, times relative to the trace's origin.

/** One row of `idle`'s devices (stream -1) or streams; step -1: over all steps. */
export interface IdleRow {
  device: number;
  stream: number;
  step: number;
  window_ns: number;
  busy_ns: number;
  idle_ns: number;
  host_wait_ns: number;
  kernel_wait_ns: number;
  other_ns: number;
  gaps: number;
}

export type GapKind = "host_wait" | "kernel_wait" | "other";

export interface IdleGap {
  device: number;
  stream: number;
  step: number;
  start_ns: number;
  end_ns: number;
  dur_ns: number;
  kind: GapKind | string;
}

export interface IdleReply {
  devices: IdleRow[];
  streams: IdleRow[];
  gaps: IdleGap[];
  gaps_total: number;
  threshold_ns: number;
  notes: string[];
}

export interface LaunchCallRow {
  call: string;
  launches: number;
  kernels: number;
  call_dur_total_ns: number;
  call_dur_mean_ns: number | null;
  call_dur_median_ns: number | null;
  call_dur_p90_ns: number | null;
  call_dur_max_ns: number | null;
  delay_mean_ns: number | null;
  delay_median_ns: number | null;
  delay_p90_ns: number | null;
  delay_max_ns: number | null;
  kernel_dur_total_ns: number;
  kernel_dur_median_ns: number | null;
  short_kernels: number;
}

/** Log-spaced bins: counts[i] launches in [edges[i], edges[i + 1]). Both lists may be empty. */
export interface Histogram {
  edges: number[];
  counts: number[];
}

export interface LaunchOutlier {
  call: string;
  call_start_ns: number;
  call_dur_ns: number;
  kernel: string | null;
  kernels: number;
  kernel_start_ns: number | null;
  kernel_dur_ns: number | null;
  launch_delay_ns: number | null;
  device: number | null;
  stream: number | null;
  operator: string | null;
  step: number | null;
  reason: string;
}

export interface LaunchOperatorRow {
  /** null: launches outside any operator */
  operator: string | null;
  launches: number;
  call_ns: number;
  kernel_ns: number;
  delay_median_ns: number | null;
  overhead_share: number | null;
}

export interface LaunchesReply {
  calls: LaunchCallRow[];
  histograms: { call_dur_ns: Histogram; launch_delay_ns: Histogram; kernel_dur_ns: Histogram };
  short_kernels: number;
  short_share: number | null;
  outliers: LaunchOutlier[];
  operators: LaunchOperatorRow[];
  unmatched: { calls_without_kernel: number; kernels_without_call: number };
  notes: string[];
  launches_total: number;
}

export interface StepOutlierRow {
  step: number;
  name: string;
  start_ns: number;
  dur_ns: number;
  ratio: number | null;
  outlier: boolean;
}

export interface StepStats {
  steps: number;
  mean_ns: number;
  median_ns: number;
  p90_ns: number;
  min_ns: number;
  max_ns: number;
  factor: number;
}

/** An outlier step: per breakdown category `<cat>_ns` and `<cat>_delta_ns` against the median step's. */
export interface OutlierStep {
  step: number;
  name: string;
  dur_ns: number;
  ratio: number;
  excess_ns: number;
  cause: string | null;
  cause_label: string | null;
  [k: string]: unknown;
}

export interface StepOutliersReply {
  steps: StepOutlierRow[];
  stats: StepStats | null;
  outliers: OutlierStep[];
  median_step: Record<string, number>;
  notes: string[];
}
