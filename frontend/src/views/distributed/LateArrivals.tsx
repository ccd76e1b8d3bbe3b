// The Distributed view's "Late arrivals" section (distributed/stragglers): who the other
// ranks waited for at the matched collectives. Per rank, latest first: how often it arrived
// last and how late it was in all (its aligned arrival less the first rank's), per step and
// at most, its worst step; a bar per rank of its lateness per step (latest on top; the 40
// latest in a window with a slider, "Show all" for every rank, as the Ranks section); the
// operators that ran long on the latest ranks against the median rank.

import { useMemo, useState } from "react";
import { useApi } from "../../api/hooks";
import type { LateOperatorRow, LateRankRow, StragglersReply } from "../../api/types/why";
import { Chart, TOOLTIP_BASE } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes } from "../../components/common";
import { Name } from "../../components/Name";
import { nameHtml, tooltipLine } from "../../util/escape";
import { fmtCount, fmtDuration, fmtPct } from "../../util/format";
import { extentOf, valueAxis } from "../../util/ticks";
import { barsHeight } from "./charts";
import { TOP_N } from "./Ranks";

const LATE_COLOR = "#fc8452";
const LAST_COLOR = "#c5221f";

export function lateRankCols(): Col<LateRankRow>[] {
  return [
    { id: "rank", header: "Rank", value: (r) => r.rank, kind: "count" },
    { id: "worker", header: "Worker", value: (r) => r.worker, nowrap: true, render: (r) => <Name text={r.worker} /> },
    { id: "instances", header: "Instances", value: (r) => r.instances, kind: "count", title: "Matched collective instances the rank joined" },
    { id: "last", header: "Last", value: (r) => r.last, kind: "count", title: "Times it arrived last" },
    { id: "last_share", header: "Last share", value: (r) => (r.last_share === null ? null : 100 * r.last_share), kind: "pct", title: "Of its instances" },
    { id: "late", header: "Late total", value: (r) => r.late_ns, kind: "us", title: "Summed lateness: its arrival (on the common time axis) less the first rank's" },
    { id: "late_step", header: "Late per step", value: (r) => r.late_per_step_ns, kind: "us" },
    { id: "late_max", header: "Late max", value: (r) => r.late_max_ns, kind: "us", title: "At one instance" },
    { id: "worst_step", header: "Worst step", value: (r) => r.worst_step, kind: "count" },
    { id: "worst_late", header: "Worst step late", value: (r) => r.worst_step_late_ns, kind: "us", title: "Its lateness in its worst step" },
  ];
}

export function lateOperatorCols(): Col<LateOperatorRow>[] {
  return [
    { id: "rank", header: "Rank", value: (r) => r.rank, kind: "count" },
    { id: "name", header: "Operator", value: (r) => r.name, width: 240 },
    { id: "rank_ns", header: "Rank time", value: (r) => r.rank_ns, kind: "us", title: "Self time per step on this rank" },
    { id: "median_ns", header: "Median rank", value: (r) => r.median_ns, kind: "us", title: "Self time per step on the median rank" },
    { id: "excess_ns", header: "Excess", value: (r) => r.excess_ns, kind: "us", title: "Rank time less the median rank's, per step" },
  ];
}

/** Horizontal bars, one per rank in the API's order (latest on top): lateness per step; `shown` ranks in the window. */
export function lateBarsOption(rows: LateRankRow[], shown: number, dark: boolean) {
  const zoom = shown < rows.length;
  return {
    tooltip: {
      ...TOOLTIP_BASE,
      trigger: "axis",
      axisPointer: { type: "shadow" },
      formatter: (params: any) => {
        const ps = Array.isArray(params) ? params : [params];
        const r = rows[ps[0]?.dataIndex ?? -1];
        if (!r) return "";
        return (
          `<div class="tt-title">rank ${r.rank} · ${nameHtml(r.worker)}</div>` +
          [
            tooltipLine(LATE_COLOR, "Late per step", fmtDuration(r.late_per_step_ns)),
            tooltipLine("#888", "Late total", fmtDuration(r.late_ns)),
            tooltipLine(LAST_COLOR, "Arrived last", `${fmtCount(r.last)} of ${fmtCount(r.instances)} (${fmtPct(r.last_share === null ? null : 100 * r.last_share)})`),
            tooltipLine("#888", "Worst step", r.worst_step === null ? "–" : `${r.worst_step} (${fmtDuration(r.worst_step_late_ns)})`),
          ].join("<br>")
        );
      },
    },
    grid: { left: 90, right: zoom ? 56 : 24, top: 16, bottom: 44 },
    xAxis: valueAxis(...extentOf(rows.map((r) => r.late_per_step_ns ?? 0)), "duration", { extra: { name: "late per step", nameLocation: "middle", nameGap: 26 } }),
    yAxis: {
      type: "category",
      inverse: true,
      data: rows.map((r) => `rank ${r.rank}`),
      axisLabel: { color: (_: unknown, i: number) => ((rows[i]?.last ?? 0) > 0 ? LAST_COLOR : dark ? "#c8c8c8" : "#444") },
    },
    dataZoom: zoom
      ? [{ type: "slider", yAxisIndex: 0, startValue: 0, endValue: shown - 1, right: 8, width: 18, showDetail: false, filterMode: "filter" }]
      : [],
    series: [
      {
        name: "Late per step",
        type: "bar",
        barMaxWidth: 16,
        itemStyle: { color: LATE_COLOR },
        data: rows.map((r) => r.late_per_step_ns ?? 0),
      },
    ],
  };
}

function LateBars({ rows, dark }: { rows: LateRankRow[]; dark: boolean }) {
  const [all, setAll] = useState(false);
  const shown = all ? rows.length : Math.min(rows.length, TOP_N);
  const option = useMemo(() => lateBarsOption(rows, shown, dark), [rows, shown, dark]);
  return (
    <div className="late-bars" data-order={rows.map((r) => r.rank).join(",")} data-shown={shown}>
      {rows.length > TOP_N && (
        <div className="controls">
          <button type="button" className="small" onClick={() => setAll((a) => !a)}>
            {all ? `Latest ${TOP_N}` : `Show all ${fmtCount(rows.length)}`}
          </button>
        </div>
      )}
      <Chart option={option} dark={dark} height={barsHeight(Math.min(shown, 48))} ariaLabel="Lateness per rank" />
      <div className="muted small-note">
        {shown < rows.length
          ? `The ${fmtCount(shown)} latest of ${fmtCount(rows.length)} ranks, latest on top; the slider on the right reaches the others.`
          : "Latest on top."}{" "}
        Ranks in red arrived last at least once.
      </div>
    </div>
  );
}

export function LateArrivalsSection({ run, span, dark }: { run: string; span?: string; dark: boolean }) {
  const state = useApi<StragglersReply>("distributed/stragglers", { run, span });
  const rCols = useMemo(() => lateRankCols(), []);
  const oCols = useMemo(() => lateOperatorCols(), []);
  return (
    <Loaded state={state}>
      {(d) => {
        if (!d.ranks.length) {
          return <Empty title="No matched collectives">{d.notes[0] ?? "No collective could be matched across the ranks: there is no arrival to compare."}</Empty>;
        }
        const latest = d.ranks[0];
        return (
          <div className="why-late">
            <Notes notes={d.notes} />
            <div className="muted late-summary" style={{ marginBottom: 8 }}>
              {latest.late_ns > 0 ? (
                <>
                  The latest rank is <b>rank {latest.rank}</b> (<bdi className="mono">{latest.worker}</bdi>): {fmtDuration(latest.late_per_step_ns)} late per step,
                  last at {fmtCount(latest.last)} of {fmtCount(latest.instances)} collective instances; the others waited for it.
                </>
              ) : (
                <>Every rank arrived at the collectives together: no rank kept the others waiting.</>
              )}
            </div>
            <LateBars rows={d.ranks} dark={dark} />
            <h3 className="sub-head">Per rank, latest first</h3>
            <div className="late-ranks">
              <DataTable rows={d.ranks} cols={rCols} exportName={[run, "late-arrivals"]} pageSize={50} filterPlaceholder="Filter workers…" />
            </div>
            <h3 className="sub-head">Operators that ran long on the latest ranks</h3>
            <div className="late-operators">
              <DataTable
                rows={d.operators}
                cols={oCols}
                exportName={[run, "late-operators"]}
                pageSize={25}
                filterPlaceholder="Filter operators…"
                emptyText="No operator ran longer on the latest ranks than on the median rank."
                caption="Self time per step against the median rank's, collectives left out"
              />
            </div>
          </div>
        );
      }}
    </Loaded>
  );
}
