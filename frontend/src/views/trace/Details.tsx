// The details panel of a timeline event (trace/event): name, source frame, times (the start
// as exact µs from the trace start, every ns the data has, and relative to its step), linked events (click to select), arguments (stacks as frames); and the selection's
// arrows built from its links. Shared by the single-trace view and the Ranks mode.

import type { EventDetailReply, EventLink } from "../../api/types/trace";
import { KeyValues } from "../../components/common";
import { Name } from "../../components/Name";
import { showBidiControls } from "../../util/bidi";
import { FrameItem, StackFrames } from "../../components/StackFrames";
import type { FlowEnd, FlowLink } from "../../timeline/Timeline";
import { fmtDuration, fmtWallTime } from "../../util/format";
import { fmtExactUs, fmtStepTime, type StepSpan } from "../../timeline/steps";
import { isStackArg, parseCallStack, parseFrame } from "../../util/frames";

function argText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

// How a linked event relates to the selected one, in words; and which links point away from it.
const RELATION_WORDS: Record<string, string> = {
  launched_by: "launched by", operator: "issued by operator", launched: "launched", forward: "forward op",
  backward: "backward op", flow_to: "flow to", flow_from: "flow from",
};
const OUTGOING = new Set(["launched", "backward", "flow_to"]);

/** The selection's arrows, from the links of its details (with their ends' rows). */
export function selectionFlows(d: EventDetailReply): FlowLink[] {
  const e = d.event;
  const self: FlowEnd = { i: e.i, ts_ns: e.ts_ns, track: e.track, depth: e.depth ?? 0 };
  const out: FlowLink[] = [];
  for (const l of d.links) {
    if (l.ts_ns === undefined || l.track === undefined) continue;
    const other: FlowEnd = { i: l.i, ts_ns: l.ts_ns, track: l.track, depth: l.depth ?? 0 };
    const kind = l.relation === "operator" ? "operator" : l.relation === "forward" || l.relation === "backward" ? "fwdbwd" : "launch";
    out.push(OUTGOING.has(l.relation) ? { from: self, to: other, kind } : { from: other, to: self, kind });
  }
  return out;
}

function LinkItem({ l, onPick }: { l: EventLink; onPick: (i: number) => void }) {
  return (
    <li data-relation={l.relation} data-i={l.i}>
      <span className="muted">{RELATION_WORDS[l.relation] ?? l.relation}</span>{" "}
      <button type="button" className="link" onClick={() => onPick(l.i)} title={showBidiControls(l.cat ?? "")}>
        <Name text={l.name} />
      </button>
      {l.dur_ns !== undefined && <span className="muted"> · {fmtDuration(l.dur_ns)}</span>}
    </li>
  );
}

export function Details({ d, onPick, onZoom, steps }: {
  d: EventDetailReply;
  onPick: (i: number) => void;
  onZoom: () => void;
  /** the trace's steps (the single-trace view's), for the start relative to its step */
  steps?: readonly StepSpan[] | null;
}) {
  const e = d.event;
  const inStep = fmtStepTime(e.ts_ns, steps, true);
  const args = Object.entries(d.args ?? {});
  // python_function events are named by their frame: "file.py(12): func"
  // (the server's frame carries the resolved path VS Code can open; parsed here otherwise)
  const src = d.source ?? (e.cat === "python_function" ? parseFrame(e.name) : null);
  return (
    <div className="details">
      <div className="details-name selectable"><Name text={e.name} /></div>
      {src?.file && (
        <ol className="frames" aria-label="Source">
          <FrameItem frame={src} />
        </ol>
      )}
      <div className="details-actions">
        <button type="button" className="small" onClick={onZoom}>Zoom to event</button>
      </div>
      <KeyValues
        items={[
          ["Category", e.cat],
          ["Start", `${fmtExactUs(e.ts_ns)} after the trace start`],
          ...(inStep ? [["Start in step", inStep] as [string, string]] : []),
          ...(d.origin_ns ? [["Wall time", fmtWallTime(d.wall_origin_ns ?? d.origin_ns, e.ts_ns)] as [string, string]] : []),
          ["Duration", fmtDuration(e.dur_ns)],
          ["Process", e.pid],
          ["Thread / stream", e.tid],
          ...(e.launched_by_graph ? [["Launched by", "a graph launch (one call, many kernels)"] as [string, string]] : []),
        ]}
      />
      {d.links.length > 0 && (
        <>
          <h3>Linked events</h3>
          <ul className="links">
            {d.links.map((l, k) => <LinkItem key={k} l={l} onPick={onPick} />)}
          </ul>
        </>
      )}
      {d.forward_stack && (
        <>
          <h3>Call stack</h3>
          <StackFrames frames={d.forward_stack.frames} from={d.forward_stack.stack_from} />
        </>
      )}
      <h3>Arguments</h3>
      {args.length ? (
        <dl className="kv args">
          {args.map(([k, v]) => (
            <div key={k} className="kv-row">
              <dt><Name text={k} /></dt>
              <dd className="selectable mono">{isStackArg(k, v) ? <StackFrames frames={d.stacks?.[k] ?? parseCallStack(v)} /> : <Name text={argText(v)} />}</dd>
            </div>
          ))}
        </dl>
      ) : (
        <div className="muted">No arguments.</div>
      )}
    </div>
  );
}

