// The Kernel view's "Launch queue" section (queue): per device stream the operations
// launched but not finished yet (a launch joins the queue at its call's start, a graph
// launch enqueues all its kernels, each leaves at its end): the longest and time-weighted
// mean queue, the time it was full (at least full_at queued: CUDA's pending launch limit)
// and the launch calls that found it full (the host blocked). The curves themselves are the
// Trace view's queue counter tracks.

import { useMemo } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { QueueReply, QueueStreamRow } from "../../api/types/why";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes, Stat } from "../../components/common";
import { setState } from "../../state/store";
import { fmtCount, fmtDuration } from "../../util/format";

export function queueCols(deviceWord: string, fullAt: number): Col<QueueStreamRow>[] {
  return [
    { id: "device", header: deviceWord, value: (r) => r.device, kind: "count" },
    { id: "stream", header: "Stream", value: (r) => r.stream, kind: "count" },
    { id: "operations", header: "Operations", value: (r) => r.operations, kind: "count", title: "Device work queued on the stream with its launch call in the trace" },
    { id: "max", header: "Longest queue", value: (r) => r.max_len, kind: "count" },
    { id: "mean", header: "Mean queue", value: (r) => r.mean_len, kind: "num", title: "Time-weighted" },
    { id: "full", header: "Time full", value: (r) => r.time_full_ns, kind: "us", title: `Time with ${fmtCount(fullAt)} or more queued` },
    { id: "blocked_calls", header: "Blocked calls", value: (r) => r.blocked_calls, kind: "count", title: `Launch calls that started with ${fmtCount(fullAt)} or more already queued: the host blocked` },
    { id: "blocked", header: "Blocked time", value: (r) => r.blocked_ns, kind: "us", title: "Time in those launch calls" },
  ];
}

/** The streams whose queue filled up (the host blocked on a launch, or could have). */
export function fullStreams(rows: QueueStreamRow[]): QueueStreamRow[] {
  return rows.filter((r) => r.time_full_ns > 0 || r.blocked_calls > 0);
}

export function QueueSection({ sel, deviceWord }: Pick<ViewProps, "sel"> & { deviceWord: string }) {
  const state = useApi<QueueReply>("queue", sel);
  const fullAt = state.data?.full_at ?? 1024;
  const cols = useMemo(() => queueCols(deviceWord, fullAt), [deviceWord, fullAt]);
  return (
    <Loaded state={state}>
      {(d) => {
        if (!d.streams.length) {
          return <Empty title="No launch queue">{d.notes[0] ?? "This trace has no device work with its launch call: there is no queue to measure."}</Empty>;
        }
        const full = fullStreams(d.streams);
        const longest = d.streams.reduce((a, r) => Math.max(a, r.max_len), 0);
        const blocked = d.streams.reduce((a, r) => a + r.blocked_calls, 0);
        const blockedNs = d.streams.reduce((a, r) => a + r.blocked_ns, 0);
        return (
          <div className="why-queue" data-full-at={d.full_at}>
            <Notes notes={d.notes} />
            <div className="stats" style={{ marginBottom: 10 }}>
              <Stat label="Longest queue" value={fmtCount(longest)} hint="Operations launched but not finished, on one stream" />
              <Stat label="Full at" value={fmtCount(d.full_at)} hint="CUDA's pending launch limit: with that many queued a launch call blocks the host" />
              <Stat label="Blocked launch calls" value={`${fmtCount(blocked)} (${fmtDuration(blockedNs)})`} />
            </div>
            <div className="queue-streams">
              <DataTable rows={d.streams} cols={cols} exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "launch-queue"]} pageSize={50} initialSort={{ id: "max", desc: true }} filterPlaceholder="Filter streams…" />
            </div>
            <div className="muted small-note queue-verdict">
              {full.length
                ? `The queue of ${full.length === 1 ? "one stream" : `${full.length} streams`} reached ${fmtCount(d.full_at)}: the host ran ahead and had to wait for the device to drain it.`
                : `No stream's queue reached ${fmtCount(d.full_at)} operations: the host never blocked on a full launch queue.`}{" "}
              The queue over time is a counter track per stream at the top of the{" "}
              <a
                href="#"
                onClick={(e) => {
                  e.preventDefault();
                  setState({ view: "Trace" });
                }}
              >
                Trace view
              </a>{" "}
              (“{deviceWord} {d.streams[0].device} stream {d.streams[0].stream} queue” and the like, with the utilization counters).
            </div>
          </div>
        );
      }}
    </Loaded>
  );
}
