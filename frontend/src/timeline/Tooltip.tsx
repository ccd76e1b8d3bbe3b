// The timeline's hover tooltip: an event (name, category, duration, start), a counter's value,
// or a busy block; each time also relative to its step ("step 17 +103.250 ms", timeline/steps).
// Names are React text through components/Name (bidi controls shown), never HTML.

import type { BusyBlock, TimelineEvent } from "../api/types/trace";
import { Name } from "../components/Name";
import { fmtDuration } from "../util/format";
import { fmtStepTime, type StepSpan } from "./steps";

export interface Hover {
  x: number;
  y: number;
  ev?: TimelineEvent;
  busy?: BusyBlock;
  counter?: { name: string; value: string; t: number };
}

/** "at 12.3 ms (step 17 +1.250 ms)": a time from the trace start and, inside a step, from the step's start. */
function at(t: number, steps: readonly StepSpan[] | null): string {
  const rel = fmtStepTime(t, steps);
  return `at ${fmtDuration(t)}${rel ? ` (${rel})` : ""}`;
}

export function TimelineTip({ hover, width, steps }: { hover: Hover; width: number; steps: readonly StepSpan[] | null }) {
  return (
    <div className="tl-tip" style={{ left: Math.min(hover.x + 12, width - 260), top: hover.y + 14 }}>
      {hover.ev ? (
        <>
          <div className="tl-tip-name"><Name text={hover.ev.name} /></div>
          <div className="muted">
            <Name text={hover.ev.cat} /> · {fmtDuration(hover.ev.dur_ns)} · {at(hover.ev.ts_ns, steps)}
          </div>
        </>
      ) : hover.counter ? (
        <>
          <div className="tl-tip-name"><Name text={hover.counter.name} /></div>
          <div className="muted">
            {hover.counter.value} {at(hover.counter.t, steps)}
          </div>
        </>
      ) : hover.busy ? (
        <>
          <div className="tl-tip-name">{hover.busy.count} events too small to draw</div>
          <div className="muted">{fmtDuration(hover.busy.end_ns - hover.busy.start_ns)} {at(hover.busy.start_ns, steps)} · click to zoom in</div>
        </>
      ) : null}
    </div>
  );
}
