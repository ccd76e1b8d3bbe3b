// Ids of the Ranks mode's merged timeline. trace/ranks gives each event its index `i` in
// its own rank's trace (trace/event with that worker), so two ranks' events can share an
// `i`; the Timeline selects by one number. Here an event of the k-th rank shown gets
// `i * MAX_WORKERS + k` (its global id), and the details of an event (trace/event of its
// worker: times on its own clock, tracks and ids of its own trace) are moved onto the
// merged reply's axis, tracks and ids, so the details panel, its arrows and its links
// work as in the single-trace view.

import type { EventDetailReply, RanksTimelineReply, TimelineEvent, TimelineFlow } from "../../api/types/trace";

/** At most this many ranks in one trace/ranks reply (docs/api.md). */
export const MAX_WORKERS = 8;

export function globalId(i: number, k: number): number {
  return i * MAX_WORKERS + k;
}

export function splitId(g: number): { i: number; k: number } {
  return { i: Math.floor(g / MAX_WORKERS), k: g % MAX_WORKERS };
}

/** track id -> index of its rank in `workers` (by the workers' track ranges, else the track's worker field). */
export function trackRanks(reply: RanksTimelineReply): Map<number, number> {
  const ws = reply.workers ?? [];
  const byName = new Map(ws.map((w, k) => [w.worker, k]));
  const out = new Map<number, number>();
  for (const t of reply.tracks) {
    let k = ws.findIndex((w) => w.tracks !== undefined && t.id >= w.tracks[0] && t.id < w.tracks[0] + w.tracks[1]);
    if (k < 0 && t.worker !== undefined) k = byName.get(t.worker) ?? -1;
    if (k >= 0) out.set(t.id, k);
  }
  return out;
}

/** The reply's events and flows with global ids (an end on a track of no known rank keeps rank 0). */
export function withGlobalIds(reply: RanksTimelineReply): { events: TimelineEvent[]; flows: TimelineFlow[] } {
  const rk = trackRanks(reply);
  const k = (track: number) => rk.get(track) ?? 0;
  return {
    events: reply.events.map((e) => ({ ...e, i: globalId(e.i, k(e.track)) })),
    flows: (reply.flows ?? []).map((f) => ({ ...f, from: globalId(f.from, k(f.from_track)), to: globalId(f.to, k(f.to_track)) })),
  };
}

/**
 * trace/event's answer for an event of the k-th rank, on the merged reply's axis: times
 * plus the rank's offset, its tracks moved to the rank's range, ids made global, the
 * origin the reply's (so wall times read the same clock).
 */
export function detailsOnAxis(d: EventDetailReply, k: number, reply: RanksTimelineReply): EventDetailReply {
  const w = reply.workers?.[k];
  const off = w?.offset_ns ?? 0;
  const first = w?.tracks?.[0] ?? 0;
  return {
    ...d,
    origin_ns: reply.origin_ns,
    wall_origin_ns: reply.wall_origin_ns ?? null,
    event: { ...d.event, i: globalId(d.event.i, k), ts_ns: d.event.ts_ns + off, track: d.event.track + first },
    links: d.links.map((l) => ({
      ...l,
      i: globalId(l.i, k),
      ts_ns: l.ts_ns === undefined ? undefined : l.ts_ns + off,
      track: l.track === undefined ? undefined : l.track + first,
    })),
  };
}
