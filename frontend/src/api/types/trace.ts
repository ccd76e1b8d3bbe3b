// Replies of the Trace view's routes (docs/api.md): trace (the timeline window), trace/ranks,
// trace/search, trace/event.
// Times are integer ns, timestamps relative to the trace origin (origin_ns, a decimal
// string, is absolute); percentages 0..100; null = not available. Names are untrusted text.

import type { SourceFrame } from "./frames";

export interface TimelineTrack {
  id: number;
  /** trace/ranks: the rank's worker */
  worker?: string;
  kind: "host" | "device" | "other" | string;
  pid: string;
  tid: string;
  process: string;
  thread: string;
  max_depth: number;
}

export interface TimelineEvent {
  i: number;
  track: number;
  depth: number;
  name: string;
  cat: string;
  ts_ns: number;
  dur_ns: number;
}

export interface BusyBlock {
  track: number;
  depth: number;
  start_ns: number;
  end_ns: number;
  count: number;
}

/** An arrow between two events (docs/api.md, GET trace: flows). */
export interface TimelineFlow {
  kind: "launch" | "fwdbwd" | "flow" | string;
  from: number;
  from_ts_ns: number;
  from_track: number;
  from_depth: number;
  to: number;
  to_ts_ns: number;
  to_track: number;
  to_depth: number;
}

/** A counter binned to the request's pixels: bin k covers [start + k*(end-start)/bins, ...). */
export interface TimelineCounter {
  name: string;
  kind: "utilization" | string;
  device: string;
  start_ns: number;
  end_ns: number;
  bins: number;
  values: number[];
}

export interface TimelineReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  span: { start_ns: number; end_ns: number };
  window: { start_ns: number; end_ns: number };
  ns_per_px: number;
  tracks: TimelineTrack[];
  events: TimelineEvent[];
  busy: BusyBlock[];
  flows?: TimelineFlow[];
  counters?: TimelineCounter[];
  counts: { events: number; busy: number; in_window: number; flows?: number; flows_in_window?: number };
  truncated: boolean;
  flows_truncated?: boolean;
  notes?: string[];
}

/** One rank of a `trace/ranks` window: how its times were put on the common axis. */
export interface RankAlignment {
  worker: string;
  rank?: number | null;
  /** added to this worker's own `trace` times (relative to its own origin_ns) to get the reply's */
  offset_ns: number;
  clock_offset_ns?: number | null;
  clock_method?: string | null;
  origin_ns?: string | null;
  /** [first track id, count] of this rank's tracks in the reply */
  tracks?: [number, number];
  counts?: TimelineReply["counts"];
  truncated?: boolean;
  flows_truncated?: boolean;
}

/** `trace/ranks`: the `trace` window over several ranks' traces, tracks prefixed by worker. */
export interface RanksTimelineReply extends TimelineReply {
  workers?: RankAlignment[];
}

export interface SearchMatch {
  i: number;
  ts_ns: number;
  dur_ns: number;
  track: number;
  depth: number;
  name: string;
}

export interface SearchReply {
  q: string;
  count: number;
  names: number;
  offset: number;
  limit: number;
  matches: SearchMatch[];
  truncated: boolean;
}

export interface EventLink {
  i: number;
  relation: string;
  name: string;
  cat: string;
  ts_ns?: number;
  dur_ns?: number;
  track?: number;
  depth?: number;
}

export interface EventDetailReply {
  origin_ns: string | null;
  wall_origin_ns?: string | null; // the origin as wall-clock ns (origin_ns + baseTimeNanoseconds)
  event: {
    i: number;
    name: string;
    cat: string;
    ts_ns: number;
    dur_ns: number;
    pid: string;
    tid: string;
    track: number;
    depth?: number;
    /** Device work launched by a graph launch (cudaGraphLaunch/hipGraphLaunch: one call, many kernels). */
    launched_by_graph?: boolean;
  };
  args: Record<string, unknown> | null;
  links: EventLink[];
  /** A python_function event's frame, with the resolved absolute `path` where found. */
  source?: SourceFrame;
  /** Per stack arg (PyTorch 1.8-1.10's "Call stack"), its frames with `path`. */
  stacks?: Record<string, SourceFrame[]>;
  /** A backward op's stack: its forward op's (`stack_from`, that op's event `forward_i`). */
  forward_stack?: { stack_from: string; forward_i: number; frames: SourceFrame[] };
}
