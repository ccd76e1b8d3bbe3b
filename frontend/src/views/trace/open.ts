// Opening one event in the Trace view from another view (a kernel's longest call, the
// events behind the Overview's verdict): selected, its details open, the window around it.
// One way to do it, so every "show in the trace" lands the same.

import { getJson } from "../../api/client";
import type { EventDetailReply } from "../../api/types/trace";
import { setState } from "../../state/store";

export interface TraceSel {
  run: string;
  worker?: string;
  span?: string;
}

/** The window shown around an event: its own length twice on each side, at least 20 µs. */
export function windowAround(tsNs: number, durNs: number): [number, number] {
  const pad = Math.max(2 * durNs, 20_000);
  return [Math.max(0, Math.floor(tsNs - pad)), Math.ceil(tsNs + durNs + pad)];
}

/** Switches to the Trace view with event `i` (a row of the trace) selected and in view. */
export async function openEvent(sel: TraceSel, i: number): Promise<void> {
  const d = await getJson<EventDetailReply>("trace/event", { ...sel, i });
  const [t0, t1] = windowAround(d.event.ts_ns, d.event.dur_ns);
  setState({ view: "Trace", ev: String(i), t0: String(t0), t1: String(t1) });
}
