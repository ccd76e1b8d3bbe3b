// The Memory view's curve and the Trace view's memory tracks joined to a snapshot (issue
// 20): when the run has a memory snapshot whose history (wall-clock µs) overlaps the trace
// (its wall-clock origin, memory_curve's wall_origin_ns), the snapshot's allocated curve of
// the same device is a second series under the trace's. The device is matched by number (the
// curve's "GPU1" is the snapshot's device 1); the CPU curve has none. With a window (the Trace
// view's, ns from the trace's origin) only that part of the history is asked for, so a zoom
// shows the snapshot's entries, not a bucket of the whole history.

import { useApi } from "../../api/hooks";
import type { MemoryCurveReply } from "../../api/types/memory";
import { deviceNumber, overlayPoints, toTraceNs, toWallUs, type SnapshotListReply, type SnapshotSummary, type SnapshotTimelineReply } from "./snapshotData";

export interface OverlaySeries { name: string; data: [number, number][] }

type Sel = { run: string; worker?: string; span?: string };
type Window = { start: number; end: number };

/** Whether a snapshot's time range overlaps the curve's [lo, hi] (ns from the trace's origin). */
export function overlaps(range: [number, number] | null, wallOriginNs: string | null | undefined, extent: [number, number]): boolean {
  if (!range || !wallOriginNs) return false;
  return toTraceNs(range[0], wallOriginNs) <= extent[1] && toTraceNs(range[1], wallOriginNs) >= extent[0];
}

/** The first device of a memory curve that a snapshot can hold (a numbered GPU / XPU ...). */
export function joinableDevice(curve: MemoryCurveReply | null | undefined): string | undefined {
  return curve?.devices.find((d) => deviceNumber(d) !== null && (curve.curves[d] ?? []).length > 0);
}

export function useSnapshotOverlay(sel: Sel, curve: MemoryCurveReply | null, device: string | undefined,
                                   window?: Window | null): OverlaySeries | null {
  const pts = curve && device ? curve.curves[device] ?? [] : [];
  const extent: [number, number] = window ? [window.start, window.end]
    : pts.length ? [pts[0].ts_ns, pts[pts.length - 1].ts_ns] : [0, 0];
  const num = deviceNumber(device);
  const list = useApi<SnapshotListReply>(curve && num !== null ? "snapshots" : null, { run: sel.run });
  const name = list.data?.snapshots[0]?.snapshot;
  const summary = useApi<SnapshotSummary>(name ? "snapshot/summary" : null, { run: sel.run, snapshot: name });
  const s = summary.data;
  const origin = curve?.wall_origin_ns;
  const joined = !!s && !!origin && num !== null && s.devices.includes(num) && (pts.length > 0 || !!window)
    && overlaps(s.time_range_us, origin, extent);
  const tl = useApi<SnapshotTimelineReply>(joined ? "snapshot/timeline" : null, {
    run: sel.run, snapshot: name, device: num, max_points: 4000,
    start_us: joined && window ? toWallUs(window.start, origin!) : undefined,
    end_us: joined && window ? toWallUs(window.end, origin!) : undefined,
  }, { keepStale: true });
  if (!joined || !tl.data || !origin) return null;
  const data = overlayPoints(tl.data.points, origin, extent);
  return data.length ? { name: `Snapshot allocated (${name})`, data } : null;
}
