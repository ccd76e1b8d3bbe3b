// Replies of the Operator view's routes (docs/api.md): operation, operation/table,
// operation/stack.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

import type { Frame } from "./frames";
import type { PieSlice } from "./pie";

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
