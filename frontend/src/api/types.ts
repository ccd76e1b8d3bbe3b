// Response shapes of the plugin's HTTP API (docs/api.md). Times are integer ns,
// timestamps relative to the trace origin (origin_ns, a decimal string, is absolute);
// percentages 0..100; null = not available. Names are untrusted text.

import type { Diagnosis } from "./diagnosis";
import type { SourceFrame } from "../util/frames";

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

export interface PieSlice {
  name: string;
  value_ns: number;
}

export interface OperationPieReply {
  group_by: string;
  device_self: PieSlice[];
  device_total: PieSlice[];
  host_self: PieSlice[];
  host_total: PieSlice[];
  notes?: string[];
}

export interface OperatorRow {
  name: string;
  input_shape?: string;
  calls: number;
  host_self_ns: number;
  host_total_ns: number;
  /** ns in Python frames the operator called back into (with_stack traces): in host_total_ns, not host_self_ns */
  python_ns?: number;
  device_self_ns: number;
  device_total_ns: number;
  tc_eligible: boolean;
  tc_self_pct: number | null;
  tc_total_pct: number | null;
}

export interface OperatorTableReply {
  group_by: string;
  has_device: boolean;
  matrix_unit?: string | null;
  rows: OperatorRow[];
  notes?: string[];
}

export interface Frame {
  file: string | null;
  line: number | null;
  func: string | null;
}

export interface StackRow extends Omit<OperatorRow, "name" | "input_shape"> {
  stack_id: number;
  /** "forward op aten::convolution": these calls (backward ops) show their forward op's stack. */
  stack_from?: string | null;
  frames: Frame[];
}

export interface OperatorStackReply {
  op_name: string;
  input_shape: string | null;
  rows: StackRow[];
}

export interface KernelPieReply {
  total_ns: number;
  rows: PieSlice[];
  notes?: string[];
}

export interface KernelRow {
  name: string;
  op?: string;
  grid?: string;
  block?: string;
  registers?: number | null;
  shared_memory?: number | null;
  op_tc_eligible?: boolean;
  calls: number;
  graph_calls?: number; // of the calls, those launched by a graph launch
  total_ns: number;
  mean_ns: number;
  max_ns: number;
  longest_event?: number; // the event row of the longest call: where the row opens in the Trace view
  min_ns: number;
  blocks_per_sm: number | null;
  occupancy: number | null;
  tensor_cores: boolean;
  // only on traces whose kernels carry them (Kineto's occupancy args, CUDA >= 12 / 13.1)
  limiting_factors?: string | null;
  block_limit_regs?: number | null;
  block_limit_shared_mem?: number | null;
  block_limit_warps?: number | null;
  block_limit_blocks?: number | null;
  block_limit_barriers?: number | null;
  priority?: number | null;
  channel?: number | null;
}

export interface KernelTableReply {
  group_by: string;
  matrix_unit?: string | null;
  rows: KernelRow[];
  notes?: string[];
}

export interface TcPieReply {
  total_ns: number;
  using_tc_pct: number | null;
  unit?: string | null;
  rows: PieSlice[];
}

export interface MemoryStatRow {
  device: string;
  name: string;
  calls: number;
  size_increase: number;
  self_size_increase: number;
  allocation_count: number;
  self_allocation_count: number;
  allocation_size: number;
  self_allocation_size: number;
  free_count: number;
  self_free_count: number;
  free_size: number;
  self_free_size: number;
}

export interface MemoryReply {
  devices: string[];
  default_device: string | null;
  device: string | null;
  rows: MemoryStatRow[];
  notes?: string[];
}

export interface CurvePoint {
  ts_ns: number;
  allocated: number | null;
  reserved: number | null;
}

export interface MemoryPeak {
  device: string;
  peak_allocated: number | null;
  peak_allocated_ns: number | null;
  peak_reserved: number | null;
  total_memory: number | null;
  reconstructed?: boolean;
}

export interface MemoryCurveReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  devices: string[];
  default_device: string | null;
  curves: Record<string, CurvePoint[]>;
  peaks: MemoryPeak[];
  notes?: string[];
}

export interface MemoryEventRow {
  device: string;
  addr: number | string;
  bytes: number;
  alloc_ns: number | null;
  free_ns: number | null;
  duration_ns: number | null;
  op: string | null;
  parent_op: string | null;
  free_op: string | null;
}

export interface MemoryEventsReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  device: string | null;
  total: number;
  truncated: boolean;
  rows: MemoryEventRow[];
}

export interface ModuleRow {
  node_id: number;
  parent_id: number;
  name: string;
  module_type: string;
  module_id: number;
  path: string;
  depth: number;
  calls: number;
  operators: number;
  host_total_ns: number;
  host_self_ns: number;
  device_total_ns: number;
  device_self_ns: number;
}

export interface ModuleReply {
  source: string | null;
  rows: ModuleRow[];
  notes?: string[];
}

export interface TreeNode {
  node_id: number;
  name: string;
  path: string;
  calls: number;
  host_total_ns: number;
  start_ns: number;
  end_ns: number;
  children: TreeNode[];
}

export interface TreeReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  source: string | null;
  nodes: TreeNode[];
  calls: unknown[];
  notes?: string[];
}

export interface TimelineTrack {
  id: number;
  /** trace/ranks: the rank's worker */
  worker?: string;
  kind: "host" | "device" | "other" | string;
  pid: string;
  tid: string;
  process: string;
  thread: string;
  max_depth: number;
}

export interface TimelineEvent {
  i: number;
  track: number;
  depth: number;
  name: string;
  cat: string;
  ts_ns: number;
  dur_ns: number;
}

export interface BusyBlock {
  track: number;
  depth: number;
  start_ns: number;
  end_ns: number;
  count: number;
}

/** An arrow between two events (docs/api.md, GET trace: flows). */
export interface TimelineFlow {
  kind: "launch" | "fwdbwd" | "flow" | string;
  from: number;
  from_ts_ns: number;
  from_track: number;
  from_depth: number;
  to: number;
  to_ts_ns: number;
  to_track: number;
  to_depth: number;
}

/** A counter binned to the request's pixels: bin k covers [start + k*(end-start)/bins, ...). */
export interface TimelineCounter {
  name: string;
  kind: "utilization" | string;
  device: string;
  start_ns: number;
  end_ns: number;
  bins: number;
  values: number[];
}

export interface TimelineReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  span: { start_ns: number; end_ns: number };
  window: { start_ns: number; end_ns: number };
  ns_per_px: number;
  tracks: TimelineTrack[];
  events: TimelineEvent[];
  busy: BusyBlock[];
  flows?: TimelineFlow[];
  counters?: TimelineCounter[];
  counts: { events: number; busy: number; in_window: number; flows?: number; flows_in_window?: number };
  truncated: boolean;
  flows_truncated?: boolean;
  notes?: string[];
}

/** One rank of a `trace/ranks` window: how its times were put on the common axis. */
export interface RankAlignment {
  worker: string;
  rank?: number | null;
  /** added to this worker's own `trace` times (relative to its own origin_ns) to get the reply's */
  offset_ns: number;
  clock_offset_ns?: number | null;
  clock_method?: string | null;
  origin_ns?: string | null;
  /** [first track id, count] of this rank's tracks in the reply */
  tracks?: [number, number];
  counts?: TimelineReply["counts"];
  truncated?: boolean;
  flows_truncated?: boolean;
}

/** `trace/ranks`: the `trace` window over several ranks' traces, tracks prefixed by worker. */
export interface RanksTimelineReply extends TimelineReply {
  workers?: RankAlignment[];
}

export interface SearchMatch {
  i: number;
  ts_ns: number;
  dur_ns: number;
  track: number;
  depth: number;
  name: string;
}

export interface SearchReply {
  q: string;
  count: number;
  names: number;
  offset: number;
  limit: number;
  matches: SearchMatch[];
  truncated: boolean;
}

export interface EventLink {
  i: number;
  relation: string;
  name: string;
  cat: string;
  ts_ns?: number;
  dur_ns?: number;
  track?: number;
  depth?: number;
}

export interface EventDetailReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  event: {
    i: number;
    name: string;
    cat: string;
    ts_ns: number;
    dur_ns: number;
    pid: string;
    tid: string;
    track: number;
    depth?: number;
    /** Device work launched by a graph launch (cudaGraphLaunch/hipGraphLaunch: one call, many kernels). */
    launched_by_graph?: boolean;
  };
  args: Record<string, unknown> | null;
  links: EventLink[];
  /** A python_function event's frame, with the resolved absolute `path` where found. */
  source?: SourceFrame;
  /** Per stack arg (PyTorch 1.8-1.10's "Call stack"), its frames with `path`. */
  stacks?: Record<string, SourceFrame[]>;
  /** A backward op's stack: its forward op's (`stack_from`, that op's event `forward_i`). */
  forward_stack?: { stack_from: string; forward_i: number; frames: SourceFrame[] };
}

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
