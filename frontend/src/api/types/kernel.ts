// Replies of the Kernel view's routes (docs/api.md): kernel, kernel/table, kernel/tc_pie.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

import type { PieSlice } from "./pie";

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
