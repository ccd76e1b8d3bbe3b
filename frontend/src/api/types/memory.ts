// Replies of the Memory view's routes (docs/api.md): memory, memory_curve, memory_events.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

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
