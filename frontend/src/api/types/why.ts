// Replies of the "Why is the step slow" routes (docs/api.md): idle, launches,
// steps/outliers, memcpy, queue, annotations, distributed/stragglers. Durations in exact
// integer ns, times relative to the trace's origin.

import type { DistInfo } from "./distributed";

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

// memcpy, queue, annotations (per trace) and distributed/stragglers (per run).

export type CopyDirection = "H2D" | "D2H" | "D2D" | "P2P" | "H2H" | "other";

/** One copy of `memcpy`'s `copies` (the largest, by start); bytes -1: unknown. gbps: bytes per ns. */
export interface CopyRow {
  name: string;
  direction: CopyDirection | string;
  /** memory kinds as the name says them: Pageable, Pinned, Device; null otherwise */
  src: string | null;
  dst: string | null;
  device: number | null;
  stream: number | null;
  start_ns: number;
  dur_ns: number;
  bytes: number;
  gbps: number | null;
  operator: string | null;
  step: number | null;
}

/** Per direction and src/dst: gbps = all bytes over all copy time; median/min/max of the single copies. */
export interface CopyDirectionRow {
  direction: CopyDirection | string;
  src: string | null;
  dst: string | null;
  copies: number;
  bytes: number;
  time_ns: number;
  gbps: number | null;
  gbps_median: number | null;
  gbps_min: number | null;
  gbps_max: number | null;
}

/** `edges` (bins + 1 times, ns) and per direction the GB/s each bin carried. */
export type CopyOverTime = { edges: number[] } & Record<string, number[]>;

export interface MemcpyReply {
  copies: CopyRow[];
  copies_total: number;
  directions: CopyDirectionRow[];
  over_time: CopyOverTime;
  notes: string[];
}

export interface QueueStreamRow {
  device: number;
  stream: number;
  operations: number;
  max_len: number;
  /** time-weighted */
  mean_len: number | null;
  time_full_ns: number;
  blocked_calls: number;
  blocked_ns: number;
}

export interface QueueReply {
  streams: QueueStreamRow[];
  full_at: number;
  notes: string[];
}

export interface AnnotationRow {
  name: string;
  count: number;
  total_ns: number;
  mean_ns: number | null;
  max_ns: number;
  kernels: number;
  kernel_ns: number;
}

export interface DeviceAnnotationRow extends AnnotationRow {
  device: number;
}

export interface AnnotationsReply {
  host: AnnotationRow[];
  device: DeviceAnnotationRow[];
  notes: string[];
}

/** A rank of `distributed/stragglers`, latest first. */
export interface LateRankRow {
  rank: number;
  worker: string;
  instances: number;
  last: number;
  last_share: number | null;
  late_ns: number;
  late_per_step_ns: number | null;
  late_max_ns: number;
  worst_step: number | null;
  worst_step_late_ns: number | null;
}

export interface LateOperatorRow {
  rank: number;
  name: string;
  rank_ns: number;
  median_ns: number;
  excess_ns: number;
}

export interface LateArrivalRow {
  rank: number;
  worker: string;
  step: number;
  instances: number;
  last: number;
  late_ns: number;
  late_max_ns: number;
}

/** The Distributed view's first sentence (analysis/stragglers.verdict). */
export interface DistVerdict {
  sentence: string;
  late: { rank: number; last: number; instances: number; late_per_step_ns: number | null } | null;
  waits: { rank: number; name: string; wait_per_step_ns: number } | null;
  missing_ranks: string;
}

export interface StragglersReply {
  info: DistInfo;
  verdict?: DistVerdict;
  ranks: LateRankRow[];
  operators: LateOperatorRow[];
  arrivals: LateArrivalRow[];
  arrivals_total: number;
  notes: string[];
}

// roofline (per trace): operators and kernels against the device's peaks.

/** An operator or kernel of `roofline`: achieved rates, intensity and the roof of its dtype
 * (null where the device or the dtype has none; tflops/tbps null without device time). */
export interface RooflineRow {
  name: string;
  /** of the op's first floating input: fp32, bf16, ...; null when none */
  dtype: string | null;
  calls: number;
  flops: number;
  /** tensor inputs + output */
  bytes: number;
  device_ns: number;
  /** achieved TFLOP/s */
  tflops: number | null;
  /** achieved TB/s */
  tbps: number | null;
  /** FLOP per byte */
  intensity: number | null;
  peak_tflops: number | null;
  peak_tbps: number | null;
  /** 0..100 */
  compute_pct: number | null;
  memory_pct: number | null;
  bound: "compute" | "memory" | string | null;
  /** "trace flops" (the flops arg) or "shapes" (from Input Dims) */
  source: string;
}

/** The device's roof: TB/s of its memory and TF/s per dtype. */
export interface RooflinePeaks {
  tbps?: number | null;
  tflops?: Record<string, number>;
}

export interface RooflineReply {
  operators: RooflineRow[];
  kernels: RooflineRow[];
  operators_total: number;
  kernels_total: number;
  /** peaks null: no roof (peaks_from says why) */
  device: { name: string | null; peaks: RooflinePeaks | null; peaks_from: string };
  notes: string[];
}
