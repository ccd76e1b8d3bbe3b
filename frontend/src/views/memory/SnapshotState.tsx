// The snapshot's allocator state (segments and blocks at its end or at a chosen time: reserved,
// allocated, free external vs internal per pool and stream, fragmentation per segment), the
// live allocations by stack (at the peak, or inside an OOM report), and OOM triage.

import { useState } from "react";
import { DataTable, type Col } from "../../components/DataTable";
import { Name } from "../../components/Name";
import { StackFrames } from "../../components/StackFrames";
import { Stat } from "../../components/common";
import { fmtBytes, fmtDuration } from "../../util/format";
import {
  fragmentationPct, poolLabel, sourceFrames, type LiveRow, type OomReport, type PoolRow, type SnapBlock, type SnapSegment,
  type SnapshotAtReply,
} from "./snapshotData";

export const liveCols: Col<LiveRow>[] = [
  { id: "frames", header: "Stack (innermost first)", value: (r) => r.frames, width: 420, render: (r) => <div style={{ whiteSpace: "pre-line" }}><Name className="stack-text" text={r.frames || "(no stack recorded)"} /></div> },
  { id: "bytes", header: "Live", value: (r) => r.bytes, kind: "bytes" },
  { id: "count", header: "Allocations", value: (r) => r.count, kind: "count" },
];

export const poolCols: Col<PoolRow>[] = [
  { id: "pool", header: "Pool", value: (r) => poolLabel(r.pool) },
  { id: "stream", header: "Stream", value: (r) => (r.stream === null || r.stream === undefined ? "" : String(r.stream)) },
  { id: "type", header: "Segment type", value: (r) => r.segment_type ?? "" },
  { id: "segments", header: "Segments", value: (r) => r.segments, kind: "count" },
  { id: "reserved", header: "Reserved", value: (r) => r.reserved_bytes, kind: "bytes" },
  { id: "allocated", header: "Allocated", value: (r) => r.allocated_bytes, kind: "bytes" },
  { id: "fext", header: "Free (external)", value: (r) => r.free_external_bytes, kind: "bytes", title: "Inactive blocks inside segments: reserved, not handed out" },
  { id: "fint", header: "Free (internal)", value: (r) => r.free_internal_bytes, kind: "bytes", title: "Rounding inside handed-out blocks: size minus requested size" },
];

export const segmentCols: Col<SnapSegment>[] = [
  { id: "address", header: "Address", value: (r) => r.address ?? "", noFilter: true },
  { id: "size", header: "Size", value: (r) => r.total_size, kind: "bytes" },
  { id: "allocated", header: "Allocated", value: (r) => r.allocated_bytes, kind: "bytes" },
  { id: "fext", header: "Free (external)", value: (r) => r.free_external_bytes, kind: "bytes" },
  { id: "fint", header: "Free (internal)", value: (r) => r.free_internal_bytes, kind: "bytes" },
  { id: "frag", header: "Fragmentation", value: (r) => fragmentationPct(r), kind: "pct", title: "Free space inside the segment as a share of its size" },
  { id: "stream", header: "Stream", value: (r) => (r.stream === null ? "" : String(r.stream)) },
  { id: "type", header: "Type", value: (r) => r.segment_type ?? "" },
  { id: "pool", header: "Pool", value: (r) => poolLabel(r.pool) },
  { id: "exp", header: "Expandable", value: (r) => (r.is_expandable === null ? null : !!r.is_expandable), kind: "bool" },
];

const blockCols: Col<SnapBlock>[] = [
  { id: "address", header: "Address", value: (r) => r.address ?? "", noFilter: true },
  { id: "size", header: "Size", value: (r) => r.size, kind: "bytes" },
  { id: "req", header: "Requested", value: (r) => r.requested_size, kind: "bytes" },
  { id: "state", header: "State", value: (r) => String(r.state ?? "") },
];

/** Segments and blocks at the end or at a chosen time; pool / stream totals. */
export function AllocatorState({ at, run, onEnd }: { at: SnapshotAtReply; run: string; onEnd: (() => void) | null }) {
  const [seg, setSeg] = useState<number | null>(null);
  const t = at.totals;
  const blocks = seg === null ? [] : at.blocks.filter((b) => b.segment === seg);
  const chosen = at.segments.find((s) => s.segment === seg);
  return (
    <div className="snapshot-state">
      <div className="controls">
        <span className="muted">{at.time_us === null ? "At the snapshot's end (its segments as dumped)." : `At ${at.time_us.toLocaleString("en-US")} µs (the history replayed backwards from the end).`}</span>
        {onEnd && <button type="button" className="small" onClick={onEnd}>Show the end</button>}
      </div>
      <div className="stats" aria-label="Allocator totals">
        <Stat label="Reserved" value={fmtBytes(t.reserved_bytes)} />
        <Stat label="Allocated" value={fmtBytes(t.allocated_bytes)} />
        <Stat label="Active" value={fmtBytes(t.active_bytes)} />
        <Stat label="Free (external)" value={fmtBytes(t.free_external_bytes)} hint="Inactive blocks inside the segments" />
        <Stat label="Free (internal)" value={fmtBytes(t.free_internal_bytes)} hint="Rounding inside handed-out blocks" />
        <Stat label="Segments" value={at.segments_total.toLocaleString("en-US")} />
      </div>
      <h3>By pool and stream</h3>
      <DataTable rows={at.pools} cols={poolCols} exportName={[run, "snapshot-pools"]} initialSort={{ id: "reserved", desc: true }} emptyText="No segments." />
      <h3>Segments</h3>
      {at.segments.length < at.segments_total && <div className="notes-inline">The {at.segments.length} largest of {at.segments_total} segments.</div>}
      <DataTable rows={at.segments} cols={segmentCols} exportName={[run, "snapshot-segments"]} initialSort={{ id: "size", desc: true }} emptyText="No segments at this time." onRowClick={(r) => setSeg(r.segment === seg ? null : r.segment)} />
      {chosen && (
        <>
          <h3>Blocks of the segment at {chosen.address ?? "?"}</h3>
          <DataTable rows={blocks} cols={blockCols} exportName={[run, "snapshot-blocks"]} emptyText="No blocks recorded." onRowClick={() => undefined} />
          {blocks.filter((b) => at.stacks[String(b.stack)]).slice(0, 1).map((b) => (
            <div key={b.address ?? "b"}><div className="muted">Stack of the first block with one:</div><StackFrames frames={sourceFrames(at.stacks[String(b.stack)])} /></div>
          ))}
        </>
      )}
    </div>
  );
}

/** One OOM report: what was asked for, what the allocator held, the advice, the live stacks. */
export function OomReportView({ r, run, t0Us, n }: { r: OomReport; run: string; t0Us: number | null; n: number }) {
  return (
    <div className="oom-report" aria-label={`OOM ${n}`}>
      <div className="stats">
        <Stat label="Requested" value={fmtBytes(r.requested_bytes)} />
        <Stat label="Reserved" value={fmtBytes(r.reserved_bytes)} />
        <Stat label="Allocated" value={fmtBytes(r.allocated_bytes)} />
        <Stat label="Free in segments" value={fmtBytes(r.free_in_segments_bytes)} />
        <Stat label="Largest free block" value={fmtBytes(r.largest_free_block_bytes)} />
        <Stat label="Device free" value={fmtBytes(r.device_free_bytes)} hint="What the driver reported free on the device" />
        {r.time_us !== null && t0Us !== null && <Stat label="At" value={fmtDuration((r.time_us - t0Us) * 1000)} />}
      </div>
      {r.advice.length > 0 && (
        <ul className="notes" aria-label="Advice">
          {r.advice.map((a, i) => <li key={i}><Name text={a} /></li>)}
        </ul>
      )}
      <DataTable rows={r.live} cols={liveCols} exportName={[run, "snapshot-oom-live"]} initialSort={{ id: "bytes", desc: true }} emptyText="No live allocations recorded." />
    </div>
  );
}
