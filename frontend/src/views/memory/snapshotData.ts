// Memory snapshots (issue 20): the replies of the snapshot routes (docs/api.md, "Memory
// snapshots") and the pure steps the Snapshot section takes on them: the allocation bands'
// layout, the snapshot's clock placed on a trace's, device names matched.

export interface SnapshotFileRow { snapshot: string; size: number; mtime: number }
export interface SnapshotListReply { run: string; snapshots: SnapshotFileRow[] }

/** The allocator accounting of _memory_viz.segsum, for a snapshot or one pool/stream of it. */
export interface AllocatorTotals {
  segments: number;
  reserved_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  free_external_bytes: number;
  free_internal_bytes: number;
}

export interface SnapshotSummary extends AllocatorTotals {
  snapshot: string;
  peak_allocated_bytes: number | null;
  history_entries: number;
  devices: number[];
  oom_count: number;
  time_range_us: [number, number] | null;
}

export interface SnapPoint { time_us: number; allocated_bytes: number; reserved_bytes: number | null }
export interface SnapAllocation {
  addr: string | null;
  size: number;
  stream: number | null;
  start_us: number | null;
  end_us: number | null; // null: still live at the snapshot's end
  stack: number;
}
export interface SnapFrame { filename: string; line: number | null; name: string }
export interface SnapshotTimelineReply {
  snapshot: string;
  device: number | null;
  time_axis?: "time_us" | "entry"; // entry: the history has no times (a profile turned snapshot): x is the entry's index
  points: SnapPoint[];
  peak: { time_us: number | null; allocated_bytes: number | null } | null;
  allocations: SnapAllocation[];
  allocations_total: number;
  stacks: Record<string, SnapFrame[]>;
}

export interface SnapSegment {
  segment: number;
  address: string | null;
  total_size: number;
  allocated_bytes: number;
  active_bytes: number;
  free_external_bytes: number;
  free_internal_bytes: number;
  stream: number | null;
  segment_type: string | null;
  pool: unknown;
  is_expandable: boolean | number | null;
  fragmentation: number | null;
}
export interface SnapBlock {
  segment: number;
  address: string | null;
  size: number;
  requested_size: number | null;
  state: string | number | null;
  stack: number;
}
export interface PoolRow extends AllocatorTotals {
  pool?: unknown;
  stream?: number | null;
  segment_type?: string | null;
}
export interface SnapshotAtReply {
  snapshot: string;
  time_us: number | null;
  device: number | null;
  segments: SnapSegment[];
  segments_total: number;
  blocks: SnapBlock[];
  blocks_total: number;
  totals: Record<string, number | null>;
  pools: PoolRow[];
  stacks: Record<string, SnapFrame[]>;
}

export interface LiveRow { stack: number; frames: string; bytes: number; count: number }
export interface SnapshotLiveReply { snapshot: string; time_us: number | null; at_peak: boolean; device: number | null; rows: LiveRow[] }

export interface OomReport {
  time_us: number | null;
  device: number | null;
  requested_bytes: number | null;
  device_free_bytes: number | null;
  reserved_bytes: number | null;
  allocated_bytes: number | null;
  free_in_segments_bytes: number | null;
  largest_free_block_bytes: number | null;
  live: LiveRow[];
  advice: string[];
}
export interface SnapshotOomsReply { snapshot: string; ooms: OomReport[]; total: number }

export interface SnapshotOperatorReply {
  time_us: number;
  trace_start_us: number;
  trace_end_us: number;
  wall_origin_ns: string;
  covers: boolean;
  operator: { name: string; i: number; start_ns: number; dur_ns: number; tid: number | string | null } | null;
}

/** An allocation drawn as a band: from x0 to x1 in the chart's time (ns from the
 * snapshot's first time), `size` bytes tall, its bottom at `steps[k][1]` from `steps[k][0]`
 * on (the bottom drops as allocations under it are freed); [y0, y1] is the span it ever
 * covers (for the axis). */
export interface Band { x0: number; x1: number; y0: number; y1: number; steps: [number, number][]; alloc: SnapAllocation }

/**
 * Bands for the allocations as memory_viz's Active Memory Timeline stacks them
 * (MemoryViz.js, process_alloc_data): each new allocation goes on top of those live, and
 * when one is freed every band above it drops by its size, so the live bands always tile
 * [0, their total] with no gap and no overlap. An allocation made before the history (no
 * start) is live from the start, under the others; one still live runs to `endUs`. x is
 * (time - t0Us) * scale: ns from `t0Us` for µs times, the entry index itself (scale 1) for
 * a history without times. The bands are the allocations sent (the window's largest): the
 * gap between their top and the allocated curve is the smaller ones.
 */
export function layoutBands(allocs: SnapAllocation[], t0Us: number, endUs: number, scale = 1000): Band[] {
  const items = allocs
    .filter((a) => a.size > 0)
    .map((a) => ({ a, s: a.start_us ?? t0Us, e: Math.max(a.end_us ?? endUs, a.start_us ?? t0Us), pre: a.start_us === null }))
    .sort((p, q) => Number(q.pre) - Number(p.pre) || p.s - q.s || q.a.size - p.a.size);
  // events in time order, frees before allocations at the same time (the space is reused)
  const ev: [number, number, number][] = []; // [time, 0 free | 1 alloc, item]
  items.forEach((it, i) => { ev.push([it.s, 1, i]); if (it.a.end_us !== null) ev.push([it.e, 0, i]); });
  ev.sort((p, q) => p[0] - q[0] || p[1] - q[1] || p[2] - q[2]);
  const x = (t: number) => (t - t0Us) * scale;
  const bottom = new Array<number>(items.length).fill(0);
  const steps: [number, number][][] = items.map(() => []);
  const high = new Array<number>(items.length).fill(0);
  const live: number[] = [];
  let total = 0;
  for (const [t, kind, i] of ev) {
    if (kind === 1) {
      bottom[i] = total;
      high[i] = total;
      total += items[i].a.size;
      live.push(i);
      steps[i].push([x(t), bottom[i]]);
      continue;
    }
    const k = live.indexOf(i);
    if (k < 0) continue;
    live.splice(k, 1);
    total -= items[i].a.size;
    for (let j = k; j < live.length; j++) {
      const m = live[j];
      bottom[m] -= items[i].a.size;
      const last = steps[m][steps[m].length - 1];
      if (last[0] === x(t)) last[1] = bottom[m];
      else steps[m].push([x(t), bottom[m]]);
    }
  }
  return items.map((it, i) => ({
    x0: x(it.s), x1: x(it.e), y0: Math.min(...steps[i].map((p) => p[1])), y1: high[i] + it.a.size, steps: steps[i], alloc: it.a,
  }));
}

/** The outline of a band (steps of its bottom, its top `size` above) as [x, bytes] points. */
export function bandOutline(b: Band): [number, number][] {
  const low: [number, number][] = [];
  b.steps.forEach(([sx, y], k) => {
    const next = k + 1 < b.steps.length ? b.steps[k + 1][0] : b.x1;
    low.push([sx, y], [next, y]);
  });
  const size = b.alloc.size;
  return [...low, ...low.slice().reverse().map(([px, y]) => [px, y + size] as [number, number])];
}

/** The snapshot device a Memory curve's device names ("GPU0", "cuda:1" -> 0, 1): its
 * trailing number; null for the CPU and names without one. */
export function deviceNumber(name: string | null | undefined): number | null {
  if (!name || /^cpu$/i.test(name)) return null;
  const m = /(\d+)$/.exec(name);
  return m ? Number(m[1]) : null;
}

/** A wall-clock µs time of the snapshot as ns from the trace's origin (the Memory curve's
 * x), given the origin as wall-clock ns (memory_curve's wall_origin_ns: a decimal string,
 * beyond a JS number's exact range). */
export function toTraceNs(timeUs: number, wallOriginNs: string): number {
  const origin = BigInt(wallOriginNs);
  return Number(BigInt(Math.round(timeUs)) * 1000n - origin);
}

/** ns from the trace's origin as the snapshot's wall-clock µs (toTraceNs's inverse, floored). */
export function toWallUs(traceNs: number, wallOriginNs: string): number {
  const ns = BigInt(Math.round(traceNs)) + BigInt(wallOriginNs);
  return Number((ns >= 0n ? ns : ns - 999n) / 1000n);
}

/** The snapshot's allocated curve as [trace ns, bytes] points inside the curve's extent
 * (one point either side kept, so the line reaches the edges); [] when they do not overlap. */
export function overlayPoints(points: SnapPoint[], wallOriginNs: string, extent: [number, number]): [number, number][] {
  const xs = points.map((p) => [toTraceNs(p.time_us, wallOriginNs), p.allocated_bytes] as [number, number]);
  const lo = xs.findIndex((p) => p[0] >= extent[0]);
  if (lo < 0) return [];
  let hi = xs.length - 1;
  while (hi >= 0 && xs[hi][0] > extent[1]) hi--;
  if (hi < lo) return [];
  return xs.slice(Math.max(0, lo - 1), Math.min(xs.length, hi + 2));
}

/** Free inside a segment as a share of its size (the external free space, split into
 * blocks the allocator cannot hand out whole), from the server's figure when it gave one. */
export function fragmentationPct(s: SnapSegment): number | null {
  if (s.fragmentation !== null && s.fragmentation !== undefined) return 100 * s.fragmentation;
  return s.total_size > 0 ? (100 * s.free_external_bytes) / s.total_size : null;
}

/** A pool id as text: (0, 0) is the default pool; a graph's private pool shows its id. */
export function poolLabel(pool: unknown): string {
  if (pool === null || pool === undefined) return "";
  const parts = Array.isArray(pool) ? pool.map(String) : String(pool).split(",").map((p) => p.trim());
  if (parts.length === 2 && parts.every((p) => p === "0")) return "default";
  return parts.length === 2 ? `(${parts.join(", ")})` : String(pool);
}

/** A stack's frames as the StackFrames component takes them. */
export function sourceFrames(frames: SnapFrame[] | undefined) {
  return (frames ?? []).map((f) => ({ file: f.filename && f.filename !== "none" ? f.filename : null, line: f.line && f.line > 0 ? f.line : null, func: f.name, path: null }));
}

const ALLOCATOR_FRAME = /(torch\/cuda\/memory|CUDACachingAllocator|c10::|c10\/)/;

/** The innermost frame worth naming (torch's own allocator frames skipped when others follow). */
export function topFrame(frames: SnapFrame[] | undefined): string {
  const list = frames ?? [];
  const user = list.find((f) => !ALLOCATOR_FRAME.test(f.filename ?? "") && !ALLOCATOR_FRAME.test(f.name ?? "")) ?? list[0];
  if (!user) return "";
  return user.filename && user.filename !== "none" ? `${user.name} (${user.filename}:${user.line})` : user.name;
}
