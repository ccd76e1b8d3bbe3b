// Replies of the Module view's routes (docs/api.md): module, tree.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

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
