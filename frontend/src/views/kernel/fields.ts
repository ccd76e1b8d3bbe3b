// The Kernel table's columns for Kineto's kernel occupancy limits, stream priority and
// channel (issue 19; analysis.kernel_fields): each column only when the trace has it.

import type { Col } from "../../components/DataTable";
import type { KernelRow } from "../../api/types/kernel";

type FieldKey = "limiting_factors" | "block_limit_regs" | "block_limit_shared_mem" | "block_limit_warps"
  | "block_limit_blocks" | "block_limit_barriers" | "priority" | "channel";

const FIELDS: { key: FieldKey; header: string; title: string }[] = [
  { key: "limiting_factors", header: "Occupancy limited by", title: "CUPTI's occupancy limiting factors (REGS, SMEM, WARPS, BLOCKS, BARRIERS), most common per kernel" },
  { key: "block_limit_regs", header: "Block limit: registers", title: "Blocks per SM the registers allow" },
  { key: "block_limit_shared_mem", header: "Block limit: shared memory", title: "Blocks per SM the shared memory allows" },
  { key: "block_limit_warps", header: "Block limit: warps", title: "Blocks per SM the warps allow" },
  { key: "block_limit_blocks", header: "Block limit: blocks", title: "Blocks per SM the hardware allows" },
  { key: "block_limit_barriers", header: "Block limit: barriers", title: "Blocks per SM the barriers allow" },
  { key: "priority", header: "Priority", title: "The stream's priority (lower is more urgent)" },
  { key: "channel", header: "Channel", title: "The hardware channel the kernel ran on" },
];

/** The columns of the fields present in any row (the route sends them only when the trace has them). */
export function kernelFieldColumns(rows: KernelRow[] | undefined): Col<KernelRow>[] {
  if (!rows?.length) return [];
  return FIELDS.filter((f) => rows.some((r) => r[f.key] != null)).map((f) =>
    f.key === "limiting_factors"
      ? { id: f.key, header: f.header, title: f.title, value: (r: KernelRow) => r.limiting_factors ?? "", nowrap: true }
      : { id: f.key, header: f.header, title: f.title, value: (r: KernelRow) => r[f.key] ?? null, kind: "count" as const },
  );
}
