// Replies of the Distributed view's routes (docs/api.md, "Distributed"): distributed/gpuinfo,
// overlap, waittime, commops, ranks, instances, matrix (stragglers: why.ts).
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

export interface DistInfo {
  backend: string | null;
  world_size: number | null;
  ranks: number[];
  missing_ranks: number[];
  workers: Record<string, string>;
  device_words: Record<string, string>;
  measured_on: Record<string, string>;
  /** ranks left out of the analyses, and why */
  excluded?: { rank: number | null; worker: string; reason: string }[];
}

export interface DistGpuInfoReply {
  info: DistInfo;
  notes: string[];
  workers: {
    worker: string;
    rank: number;
    devices: {
      id: number;
      name: string | null;
      kind: string;
      total_memory: number | null;
      compute_capability: string | null;
      num_sms: number | null;
    }[];
  }[];
}

export interface OverlapRow {
  rank: number;
  worker: string;
  step?: number;
  steps?: number;
  step_ns: number;
  computation_ns: number;
  communication_ns: number;
  /** null when computation is timed on the device but communication only on the host */
  overlap_ns: number | null;
  other_ns: number | null;
  /** rank rows: the Overview's Communication, per step (from the step breakdown) */
  overview_communication_ns?: number | null;
  /** rank rows: one line with both figures and why they differ */
  communication_note?: string;
}

export interface DistOverlapReply {
  info: DistInfo;
  notes: string[];
  ranks: OverlapRow[];
  steps: OverlapRow[];
}

export interface WaitRow {
  rank: number;
  worker: string;
  step?: number;
  communication_ns?: number;
  wait_ns: number;
  transfer_ns: number;
}

export interface DistWaitReply {
  info: DistInfo;
  notes: string[];
  ranks: WaitRow[];
  steps: WaitRow[];
}

export interface CommOpRow {
  rank: number;
  worker: string;
  name: string;
  /** all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, ...; "" when unknown */
  family: string;
  pg_name: string;
  group_size: number | null;
  calls: number;
  /** this rank's input messages, summed over the calls */
  bytes: number | null;
  out_bytes: number | null;
  total_ns: number;
  avg_ns: number;
  /** nccl-tests' algorithm and bus bandwidth, GB/s */
  algbw_gbps: number | null;
  busbw_gbps: number | null;
  /** where the calls were timed: "device" (kernels) or "host" */
  time_on: string;
  wait_ns: number | null;
  transfer_ns: number | null;
}

export interface DistCommOpsReply {
  info: DistInfo;
  notes: string[];
  rows: CommOpRow[];
}

/** One rank of `distributed/ranks`: figures are means per step. */
export interface RankRow {
  rank: number;
  worker: string;
  steps: number;
  step_ns: number | null;
  computation_ns: number | null;
  communication_ns: number | null;
  overlap_ns: number | null;
  other_ns: number | null;
  wait_ns: number | null;
  transfer_ns: number | null;
  /** the shift put on this rank's times to bring it onto the common axis */
  clock_offset_ns: number | null;
  /** how the shift was found: "collectives", "baseTimeNanoseconds", "none" */
  clock_method: string | null;
  outlier: boolean;
  outlier_reason: string | null;
}

export interface DistRanksReply {
  info: DistInfo;
  notes: string[];
  ranks: RankRow[];
  /** ranks, slowest first */
  order: number[];
  /** truncated: only the first steps that fit in 1,000,000 numbers */
  step_matrix: { ranks: number[]; steps: number[]; step_ns: (number | null)[][]; truncated?: boolean };
}

/** One collective instance across the ranks (`distributed/instances`). */
export interface InstanceRow {
  name: string;
  family: string;
  pg_name: string;
  matched_by?: string;
  seq?: number | null;
  occurrence?: number | null;
  ranks: number;
  complete?: boolean;
  first_arrival_ns: number | null;
  last_arrival_ns: number | null;
  skew_ns: number | null;
  slowest_rank: number | null;
  mean_duration_ns: number | null;
  bytes: number | null;
  algbw_min_gbps: number | null;
  algbw_median_gbps: number | null;
  busbw_min_gbps: number | null;
  busbw_median_gbps: number | null;
  /** where the server gives them: the instance's wait and transfer, summed or mean over its ranks */
  wait_ns?: number | null;
  transfer_ns?: number | null;
  [k: string]: unknown;
}

export interface DistInstancesReply {
  info?: DistInfo;
  notes?: string[];
  /** arrivals are relative to it (absolute, on the first rank's clock; the axis of trace/ranks) */
  origin_ns?: string | null;
  total: number;
  rows: InstanceRow[];
  truncated: boolean;
  sort?: string;
  limit?: number;
  offset?: number;
}

export interface DistMatrixReply {
  info?: DistInfo;
  ranks: number[];
  /** bytes[i][j]: point-to-point bytes sent from ranks[i] to ranks[j] */
  bytes: (number | null)[][];
  notes: string[];
}
