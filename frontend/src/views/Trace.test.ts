// The selection's arrows come from its details' links: direction by relation, each end
// on its own row (so an end outside the window or merged into a busy block still counts).
import { describe, expect, it } from "vitest";
import type { EventDetailReply } from "../api/types/trace";
import { selectionFlows } from "./Trace";

const kernel: EventDetailReply = {
  origin_ns: "0",
  event: { i: 10, name: "gemm", cat: "kernel", ts_ns: 500, dur_ns: 100, pid: "0", tid: "7", track: 3, depth: 0 },
  args: {},
  links: [
    { i: 4, relation: "launched_by", name: "cudaLaunchKernel", cat: "cuda_runtime", ts_ns: 100, dur_ns: 5, track: 0, depth: 4 },
    { i: 2, relation: "operator", name: "aten::mm", cat: "cpu_op", ts_ns: 90, dur_ns: 50, track: 0, depth: 3 },
    { i: 99, relation: "launched", name: "no place", cat: "kernel" }, // without its row: no arrow
  ],
};

describe("selectionFlows", () => {
  it("points launches and operators at a kernel", () => {
    expect(selectionFlows(kernel)).toEqual([
      { from: { i: 4, ts_ns: 100, track: 0, depth: 4 }, to: { i: 10, ts_ns: 500, track: 3, depth: 0 }, kind: "launch" },
      { from: { i: 2, ts_ns: 90, track: 0, depth: 3 }, to: { i: 10, ts_ns: 500, track: 3, depth: 0 }, kind: "operator" },
    ]);
  });
  it("points a forward op at its backward and a launch call at its kernels", () => {
    const fwd: EventDetailReply = {
      ...kernel,
      event: { ...kernel.event, i: 1, cat: "cpu_op", track: 0, depth: 2 },
      links: [
        { i: 7, relation: "backward", name: "MmBackward0", cat: "cpu_op", ts_ns: 900, track: 1, depth: 1 },
        { i: 8, relation: "launched", name: "gemm", cat: "kernel", ts_ns: 950, track: 3, depth: 0 },
        { i: 0, relation: "forward", name: "x", cat: "cpu_op", ts_ns: 5, track: 0, depth: 0 },
      ],
    };
    const arrows = selectionFlows(fwd).map((f) => [f.from.i, f.to.i, f.kind]);
    expect(arrows).toEqual([[1, 7, "fwdbwd"], [1, 8, "launch"], [0, 1, "fwdbwd"]]);
  });
});
