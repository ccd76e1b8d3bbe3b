// A window reply's counter tracks (device utilization) as the timeline draws them:
// shared by the single-trace view and the Ranks mode.

import type { TimelineCounter } from "../../api/types/trace";
import type { Counter } from "../../timeline/Timeline";
import { binPoints } from "../../timeline/coords";

export function windowCounters(counters: readonly TimelineCounter[] | undefined): Counter[] {
  return (counters ?? []).map((c) => ({
    name: c.name,
    kind: c.kind,
    max: c.kind === "utilization" ? 1 : undefined,
    points: binPoints(c.start_ns, c.end_ns, c.values),
    format: (v: number) => (c.kind === "utilization" ? `${(v * 100).toFixed(1)}%` : String(v)),
  }));
}
