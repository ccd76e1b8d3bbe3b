// Statistics of the time range selected on the timeline's ruler (like Perfetto's area
// selection), from `GET trace/range_stats` (docs/api.md, "Why is the step slow"): the
// events overlapping the range by kind (operators, kernels, memcpy, runtime calls, ...)
// and name, one table per kind: count, time inside the range (total, less children on
// the same track: self), average and longest whole event. The reply's types live here.

import { useEffect, useMemo, useState } from "react";
import type { Params } from "../../api/client";
import { useApi } from "../../api/hooks";
import { DataTable, type Col } from "../../components/DataTable";
import { ErrorBox, Notes, Progress, Tabs } from "../../components/common";
import type { Range } from "../../timeline/coords";
import { rangeLabel } from "../../timeline/rangeSelect";
import { stepRangeLabel, type StepSpan } from "../../timeline/steps";
import { fmtCount, fmtDuration } from "../../util/format";

/** One name of one kind in the range. */
export interface RangeStatsRow {
  kind: string;
  name: string;
  count: number;
  /** time inside the range */
  total_ns: number;
  /** total less its children's time on the same track */
  self_ns: number;
  /** of the whole events */
  avg_ns: number;
  max_ns: number;
  /** device work: the operator that launched most of its time in the range (null: host rows, or launch not in the trace) */
  launched_by?: string | null;
}

/** One kind (the roles of trace.roles) in the range. */
export interface RangeStatsKind {
  kind: string;
  label: string;
  count: number;
  total_ns: number;
  self_ns: number;
}

export interface RangeStatsReply {
  start_ns: number;
  end_ns: number;
  /** events overlapping the range */
  events: number;
  kinds: RangeStatsKind[];
  /** at most MAX_RANGE_ROWS (200) names per kind, heaviest first */
  rows: RangeStatsRow[];
  /** per kind: the names left out of `rows` */
  more: Record<string, number>;
  /** e.g. how many self times were clamped at 0 (children overlapping each other) */
  notes?: string[];
}

export const RANGE_COLS: Col<RangeStatsRow>[] = [
  { id: "name", header: "Name", value: (r) => r.name, width: 240 },
  { id: "count", header: "Count", value: (r) => r.count, kind: "count" },
  // what each column counts is in its header: the first two are clipped to the range,
  // the last two are of the whole events, wherever the range cut them
  { id: "total", header: "Total in range", value: (r) => r.total_ns, kind: "us", title: "Time inside the range: an event that began before it or ends after it counts only its part inside" },
  { id: "self", header: "Self in range", value: (r) => r.self_ns, kind: "us", title: "Time inside the range less its children's on the same track" },
  { id: "avg", header: "Average (whole events)", value: (r) => r.avg_ns, kind: "us", title: "Average duration of the whole events, not clipped to the range: what one call costs" },
  { id: "max", header: "Max (whole event)", value: (r) => r.max_ns, kind: "us", title: "Longest whole event, not clipped to the range" },
];

/** Device work's extra column: what launched it on the CPU. */
const LAUNCHED_BY: Col<RangeStatsRow> = {
  id: "launched_by", header: "Launched by", value: (r) => r.launched_by ?? "", width: 200,
  title: "The operator whose launch call issued most of this name's time in the range",
};
const DEVICE_KINDS = new Set(["kernel", "memcpy", "memset"]);

/** The columns of a kind's table: device work adds who launched it. */
export function rangeCols(kind: string): Col<RangeStatsRow>[] {
  return DEVICE_KINDS.has(kind) ? [RANGE_COLS[0], LAUNCHED_BY, ...RANGE_COLS.slice(1)] : RANGE_COLS;
}

/** A kind's tab: its label with its event count. */
export function kindTabLabel(k: RangeStatsKind): string {
  return `${k.label} (${fmtCount(k.count)})`;
}

/** The rows of one kind. */
export function rowsOfKind(d: RangeStatsReply, kind: string): RangeStatsRow[] {
  return d.rows.filter((r) => r.kind === kind);
}

/** The reply's tables: a tab per kind, the chosen kind's totals and table. */
export function RangeStatsTables({ d, kind, onKind, exportName }: {
  d: RangeStatsReply;
  kind: string | null;
  onKind: (k: string) => void;
  exportName?: (string | undefined | null)[];
}) {
  const k = d.kinds.find((x) => x.kind === kind) ?? d.kinds[0];
  const rows = useMemo(() => (k ? rowsOfKind(d, k.kind) : []), [d, k]);
  if (!k) return <div className="muted">No events in this range.</div>;
  const more = d.more[k.kind] ?? 0;
  return (
    <div className="range-kind" data-kind={k.kind} style={{ display: "flex", flexDirection: "column", gap: 6 }}>
      <Tabs label="Kinds of events in the range" value={k.kind} onChange={onKind} options={d.kinds.map((x) => ({ value: x.kind, label: kindTabLabel(x) }))} />
      <div className="muted range-kind-totals">
        {k.label}: {fmtCount(k.count)} events · total {fmtDuration(k.total_ns)} · self {fmtDuration(k.self_ns)}
        {more > 0 && <span className="range-more" data-more={more}> · {fmtCount(more)} more {more === 1 ? "name" : "names"} not listed</span>}
      </div>
      <DataTable
        key={k.kind}
        rows={rows}
        cols={rangeCols(k.kind)}
        initialSort={{ id: "total", desc: true }}
        exportName={[...(exportName ?? ["range"]), k.kind]}
        rowKey={(r) => r.name}
        pageSize={25}
      />
    </div>
  );
}

/** The panel under the timeline: fetches the range's statistics and shows them. */
export function RangeStats({ sel, range, onZoom, onClose, steps }: {
  sel: Params;
  range: Range;
  /** the trace's steps: the range is also said relative to them */
  steps?: readonly StepSpan[] | null;
  onZoom: () => void;
  onClose: () => void;
}) {
  const st = useApi<RangeStatsReply>("trace/range_stats", { ...sel, start_ns: range.start, end_ns: range.end }, { keepStale: true });
  const d = st.data && st.data.start_ns === range.start && st.data.end_ns === range.end ? st.data : null;
  const [kind, setKind] = useState<string | null>(null);
  const inSteps = stepRangeLabel(range, steps);
  // keep the chosen kind while it is in the new range, else the heaviest
  useEffect(() => {
    if (d && !d.kinds.some((k) => k.kind === kind)) setKind(d.kinds[0]?.kind ?? null);
  }, [d]); // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <section
      className="card range-stats"
      aria-label="Statistics of the selected range"
      data-start-ns={range.start}
      data-end-ns={range.end}
      data-events={d ? d.events : ""}
    >
      <header className="card-head">
        <h2>
          Selected range {rangeLabel(range)}
          {inSteps && <span className="range-steps"> · {inSteps}</span>}
          {d && <span className="muted"> · {fmtCount(d.events)} events</span>}
        </h2>
        <div className="card-actions" style={{ display: "flex", gap: 6 }}>
          <button type="button" className="small" onClick={onZoom} title="Show exactly this range">Zoom to range</button>
          <button type="button" className="icon-btn" aria-label="Close range statistics" title="Clear the selection (Escape)" onClick={onClose}>✕</button>
        </div>
      </header>
      <div className="card-body">
        {st.error ? (
          <ErrorBox error={st.error} />
        ) : d ? (
          <>
            <Notes notes={d.notes} />
            <RangeStatsTables d={d} kind={kind} onKind={setKind} exportName={["range", String(sel.run ?? ""), String(range.start), String(range.end)]} />
          </>
        ) : (
          <Progress progress={st.progress} />
        )}
      </div>
    </section>
  );
}
