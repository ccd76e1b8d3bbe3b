// The Kernel table's extra columns (occupancy limits, priority, channel) appear only for the
// fields some row carries, and the device-counter table's columns read the route's rows.
import { describe, expect, it } from "vitest";
import type { KernelRow } from "../../api/types/kernel";
import { counterColumns, type KernelCounterRow } from "./Counters";
import { kernelFieldColumns } from "./fields";

const BASE: KernelRow = {
  name: "gemm", calls: 3, total_ns: 15000, mean_ns: 5000, max_ns: 5000, min_ns: 5000,
  blocks_per_sm: 0, occupancy: 25, tensor_cores: false,
};

describe("kernelFieldColumns", () => {
  it("adds nothing for a trace without the fields", () => {
    expect(kernelFieldColumns([BASE, { ...BASE, name: "relu" }])).toEqual([]);
    expect(kernelFieldColumns(undefined)).toEqual([]);
  });

  it("adds the columns some row has, with their values", () => {
    const rows: KernelRow[] = [
      { ...BASE, limiting_factors: "REGS", block_limit_regs: 2, priority: -1, channel: null },
      { ...BASE, name: "old_kernel", limiting_factors: null, block_limit_regs: null, priority: null, channel: null },
    ];
    const cols = kernelFieldColumns(rows);
    expect(cols.map((c) => c.id)).toEqual(["limiting_factors", "block_limit_regs", "priority"]);
    expect(cols.map((c) => c.value(rows[0]))).toEqual(["REGS", 2, -1]);
    expect(cols.map((c) => c.value(rows[1]))).toEqual(["", null, null]);
  });
});

describe("counterColumns", () => {
  it("reads a kernel_counters row", () => {
    const row: KernelCounterRow = { name: "gemm", counter: "sm__throughput", track: "GPU 0 Counters", calls: 2, covered_ns: 400000, avg: 40 };
    const cols = counterColumns();
    expect(Object.fromEntries(cols.map((c) => [c.id, c.value(row)]))).toEqual({
      name: "gemm", counter: "sm__throughput", avg: 40, calls: 2, covered: 400000, track: "GPU 0 Counters",
    });
  });
});
