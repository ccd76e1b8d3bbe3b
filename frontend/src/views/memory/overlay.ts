// The Memory view's curve joined to a snapshot (issue 20): when the run has a memory
// snapshot whose history (wall-clock µs) overlaps the trace (its wall-clock origin,
// memory_curve's wall_origin_ns), the snapshot's allocated curve of the same device is a
// second series under the trace's. The device is matched by number (the curve's "GPU1" is
// the snapshot's device 1); the CPU curve has none.

import { useApi } from "../../api/hooks";
import type { MemoryCurveReply } from "../../api/types";
import { deviceNumber, overlayPoints, toTraceNs, type SnapshotListReply, type SnapshotSummary, type SnapshotTimelineReply } from "./snapshotData";

export interface OverlaySeries { name: string; data: [number, number][] }

type Sel = { run: string; worker?: string; span?: string };

/** Whether a snapshot's time range overlaps the curve's [lo, hi] (ns from the trace's origin). */
export function overlaps(range: [number, number] | null, wallOriginNs: string | null | undefined, extent: [number, number]): boolean {
  if (!range || !wallOriginNs) return false;
  return toTraceNs(range[0], wallOriginNs) <= extent[1] && toTraceNs(range[1], wallOriginNs) >= extent[0];
}

export function useSnapshotOverlay(sel: Sel, curve: MemoryCurveReply | null, device: string | undefined): OverlaySeries | null {
  const pts = curve && device ? curve.curves[device] ?? [] : [];
  const extent: [number, number] = pts.length ? [pts[0].ts_ns, pts[pts.length - 1].ts_ns] : [0, 0];
  const num = deviceNumber(device);
  const list = useApi<SnapshotListReply>(curve && num !== null ? "snapshots" : null, { run: sel.run });
  const name = list.data?.snapshots[0]?.snapshot;
  const summary = useApi<SnapshotSummary>(name ? "snapshot/summary" : null, { run: sel.run, snapshot: name });
  const s = summary.data;
  const joined = !!s && num !== null && s.devices.includes(num) && pts.length > 0 && overlaps(s.time_range_us, curve?.wall_origin_ns, extent);
  const tl = useApi<SnapshotTimelineReply>(joined ? "snapshot/timeline" : null, { run: sel.run, snapshot: name, device: num, max_points: 4000 });
  if (!joined || !tl.data || !curve?.wall_origin_ns) return null;
  const data = overlayPoints(tl.data.points, curve.wall_origin_ns, extent);
  return data.length ? { name: `Snapshot allocated (${name})`, data } : null;
}
