// The columns the per-rank tables share (the Distributed view's figures table and the
// Ranks section's table): one definition of each time figure's header and meaning.

import type { RankRow } from "../../api/types/distributed";
import type { Col } from "../../components/DataTable";

type TimeFields = Pick<RankRow, "step_ns" | "computation_ns" | "communication_ns" | "overlap_ns" | "other_ns" | "wait_ns" | "transfer_ns">;

/** The time columns of a rank (or rank and step) row, each title ending in `each`
 * (" (total)", " (mean per step)"): shared by the figures table and the Ranks table. */
export function timeCols<T extends TimeFields>(each: string): Col<T>[] {
  return [
    { id: "step_ns", header: "Step time", value: (r) => r.step_ns, kind: "us", title: "Step time" + each },
    { id: "computation_ns", header: "Computation", value: (r) => r.computation_ns, kind: "us", title: "Includes the time overlapped with communication" + each },
    { id: "communication_ns", header: "Communication", value: (r) => r.communication_ns, kind: "us", title: "All communication time, overlapped with computation or not" + each },
    { id: "overlap_ns", header: "Overlap", value: (r) => r.overlap_ns, kind: "us", title: "Computation and communication at the same time; – when they are timed on different clocks (device and host)" + each },
    { id: "other_ns", header: "Other", value: (r) => r.other_ns, kind: "us", title: "Neither computation nor communication" + each },
    { id: "wait_ns", header: "Waiting", value: (r) => r.wait_ns, kind: "us", title: "Communication spent waiting for the slowest rank" + each },
    { id: "transfer_ns", header: "Transfer", value: (r) => r.transfer_ns, kind: "us", title: "Communication spent transferring data" + each },
  ];
}

/** Columns that say something about these rows: a column whose every value is empty
 * (null, undefined or "") is dropped, so a CPU job's tables have no column of dashes
 * (overlap on two clocks, bandwidth of unknown sizes, clock methods never needed). The
 * `keep` columns (the row's identity) stay even when empty. */
export function shownCols<T>(cols: Col<T>[], rows: T[], keep: string[] = ["rank", "worker"]): Col<T>[] {
  if (!rows.length) return cols;
  return cols.filter((c) => keep.includes(c.id) || rows.some((r) => {
    const v = c.value(r);
    return v !== null && v !== undefined && v !== "";
  }));
}
