// The trace routes send their busy blocks as columns (docs/api.md, GET trace): one list per
// field, so thousands of blocks do not repeat the same five keys. The views draw rows.

import type { BusyBlock, TimelineReply } from "../../api/types/trace";

export interface BusyColumns {
  track: number[];
  depth: number[];
  start_ns: number[];
  end_ns: number[];
  count: number[];
}

/** A trace route's reply as it comes over the wire. */
export type WireReply<T extends TimelineReply> = Omit<T, "busy"> & { busy: BusyColumns };

/** The busy blocks as rows; a reply whose columns disagree in length is refused. */
export function busyRows(c: BusyColumns): BusyBlock[] {
  const n = c.track.length;
  if ([c.depth, c.start_ns, c.end_ns, c.count].some((col) => col.length !== n)) {
    throw new Error("malformed reply: the busy columns differ in length");
  }
  const out: BusyBlock[] = new Array(n);
  for (let k = 0; k < n; k++) {
    out[k] = { track: c.track[k], depth: c.depth[k], start_ns: c.start_ns[k], end_ns: c.end_ns[k], count: c.count[k] };
  }
  return out;
}

/** The reply the views read: busy blocks as rows. */
export function fromWire<T extends TimelineReply>(r: WireReply<T>): T {
  return { ...r, busy: busyRows(r.busy) } as T;
}
