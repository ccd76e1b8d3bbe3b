// @vitest-environment jsdom
import { act } from "react";
import { createRoot } from "react-dom/client";
import { describe, expect, it } from "vitest";
import { DataTable } from "../components/DataTable";
import { figureCols, fmtGBps, joinFigures, totalLabel } from "./Distributed";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

describe("Distributed labels", () => {
  it("says which steps a total covers", () => {
    expect(totalLabel([{ steps: 2 }, { steps: 2 }])).toBe("total over 2 steps");
    expect(totalLabel([{ steps: 1 }])).toBe("total over 1 step");
    expect(totalLabel([{ steps: 2 }, { steps: 3 }])).toBe("total over each rank's steps");
  });

  it("shows bandwidths with three significant digits, unknown as a dash", () => {
    expect(fmtGBps(0.0030151)).toBe("0.00302");
    expect(fmtGBps(123.456)).toBe("123");
    expect(fmtGBps(1234.5)).toBe("1,230");
    expect(fmtGBps(null)).toBe("–");
    expect(fmtGBps(Number.NaN)).toBe("–");
  });

  it("keeps an unknown overlap unknown when joining the wait figures", () => {
    const row = { rank: 0, worker: "rank0", steps: 1, step_ns: 10, computation_ns: 4, communication_ns: 3, overlap_ns: null, other_ns: null };
    expect(joinFigures([row], [{ rank: 0, worker: "rank0", wait_ns: 1, transfer_ns: 2 }])).toEqual([{ ...row, wait_ns: 1, transfer_ns: 2 }]);
  });

  it("shows an unknown overlap as a dash, not 0, and says what a figure covers", () => {
    const rows = joinFigures(
      [{ rank: 0, worker: "rank0", steps: 2, step_ns: 100000, computation_ns: 40000, communication_ns: 30000, overlap_ns: null, other_ns: null }],
      [{ rank: 0, worker: "rank0", wait_ns: 0, transfer_ns: 30000 }],
    );
    const host = document.createElement("div");
    document.body.appendChild(host);
    act(() => createRoot(host).render(<DataTable rows={rows} cols={figureCols(false, "total over 2 steps")} />));
    const cells = [...host.querySelectorAll("tbody td")].map((td) => td.textContent);
    const headers = [...host.querySelectorAll("thead th")];
    const col = (name: string) => headers.findIndex((th) => th.textContent?.startsWith(name));
    expect(cells[col("Overlap")]).toBe("–");
    expect(cells[col("Other")]).toBe("–");
    expect(cells[col("Computation")]).toBe("40.0");
    expect(headers[col("Communication")].getAttribute("title")).toContain("(total over 2 steps)");
    host.remove();
  });
});
