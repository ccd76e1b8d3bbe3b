// The CUDA graphs section's columns: graph id -1 read as "unknown", shares as percents
// labelled with the trace's device word.
import { describe, expect, it } from "vitest";
import { attributionColumns, graphColumns, type GraphAttributionRow, type GraphRow } from "./Graphs";

const G: GraphRow = { graph_id: 1, replays: 3, kernels: 12, device_ns: 51000, share: 51 / 59 };
const A: GraphAttributionRow = { annotation: "phase_A", graphs: 1, kernels: 6, device_ns: 36000, share: 36 / 59 };

describe("graph columns", () => {
  it("give the graph id, replays and share in percent", () => {
    const cols = graphColumns("GPU");
    const byId = Object.fromEntries(cols.map((c) => [c.id, c]));
    expect(byId.graph.value(G)).toBe("1");
    expect(byId.graph.value({ ...G, graph_id: -1 })).toBe("unknown");
    expect(byId.replays.value(G)).toBe(3);
    expect(Number(byId.share.value(G))).toBeCloseTo(86.44, 2);
    expect(byId.share.header).toBe("Share of GPU time");
  });
  it("attribute by annotation", () => {
    const byId = Object.fromEntries(attributionColumns("XPU").map((c) => [c.id, c]));
    expect(byId.annotation.value(A)).toBe("phase_A");
    expect(byId.device.value(A)).toBe(36000);
    expect(byId.share.header).toBe("Share of XPU time");
  });
});
