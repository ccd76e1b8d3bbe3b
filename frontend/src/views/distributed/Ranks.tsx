// The "Ranks" section of the Distributed view (distributed/ranks): per rank, a stacked
// bar of its mean step (slowest rank on top; a slider over the ranks, the slowest 40 at
// first, "Show all" for every rank), the outlier ranks and why, the clock corrections,
// a step × rank heatmap of step time, and the per-rank table (exportable).

import { useMemo, useState } from "react";
import type { DistRanksReply, RankRow } from "../../api/types/distributed";
import { Chart } from "../../components/Chart";
import { Name } from "../../components/Name";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Notes, Tabs } from "../../components/common";
import { fmtCount } from "../../util/format";
import { barsHeight, rankBarsOption, stepHeatmapOption, type BarMode } from "./charts";
import { timeCols } from "./columns";
import { clockNote, fitCount, METHOD_WORDS, orderRanks, outliers, stepHeatmap } from "./data";

/** Pixels per rank in the heatmap's window. */
const ROW_PX = 14;

/** Ranks shown in the bars' window at first (a slider reaches the others). */
export const TOP_N = 40;

export function rankCols(): Col<RankRow>[] {
  return [
    { id: "rank", header: "Rank", value: (r) => r.rank, kind: "count" },
    { id: "worker", header: "Worker", value: (r) => r.worker, nowrap: true, render: (r) => <Name text={r.worker} /> },
    { id: "steps", header: "Steps", value: (r) => r.steps, kind: "count" },
    ...timeCols<RankRow>(" (mean per step)"),
    { id: "clock_offset_ns", header: "Clock shift", value: (r) => r.clock_offset_ns, kind: "delta_us", title: "The shift applied to this rank's times to put every rank on one time axis" },
    { id: "clock_method", header: "Clock method", value: (r) => r.clock_method, nowrap: true, title: "How the shift was found: collectives (the smallest shift that keeps every matched collective in time across ranks), baseTimeNanoseconds, none" },
    { id: "outlier", header: "Outlier", value: (r) => (r.outlier ? r.outlier_reason ?? "yes" : ""), width: 360, title: "Why the rank stands out" },
  ];
}

function OutlierList({ rows }: { rows: RankRow[] }) {
  if (!rows.length) return <div className="muted outlier-none">No outlier ranks.</div>;
  return (
    <ul className="plain outliers" aria-label="Outlier ranks">
      {rows.map((r) => (
        <li key={r.rank} data-rank={r.rank}>
          <b className="worse">⚠ rank {r.rank}</b> <Name className="mono" text={r.worker} />: {r.outlier_reason ?? "outlier"}
        </li>
      ))}
    </ul>
  );
}

function RankBars({ rows, dark }: { rows: RankRow[]; dark: boolean }) {
  const [mode, setMode] = useState<BarMode>("breakdown");
  const [all, setAll] = useState(false);
  const shown = all ? rows.length : Math.min(rows.length, TOP_N);
  const height = barsHeight(Math.min(shown, 48));
  const option = useMemo(() => rankBarsOption(rows, mode, shown, dark), [rows, mode, shown, dark]);
  const thin = all && rows.length > 48;
  return (
    <div className="rank-bars" data-order={rows.map((r) => r.rank).join(",")} data-shown={shown}>
      <div className="controls">
        <Tabs label="Bars" value={mode} onChange={setMode} options={[{ value: "breakdown", label: "Step breakdown" }, { value: "wait", label: "Waiting vs transfer" }]} />
        {rows.length > TOP_N && (
          <button type="button" className="small" onClick={() => setAll((a) => !a)}>
            {all ? `Slowest ${TOP_N}` : `Show all ${fmtCount(rows.length)}`}
          </button>
        )}
        <span className="muted">
          {shown < rows.length
            ? `The ${fmtCount(shown)} slowest of ${fmtCount(rows.length)} ranks, slowest on top; the slider on the right reaches the others.`
            : `All ${fmtCount(rows.length)} ranks, slowest on top.`}
          {thin ? ` Each bar is thinner than a pixel here: drag the slider's ends to read single ranks.` : ""}
        </span>
      </div>
      <Chart option={option} dark={dark} height={height} ariaLabel="Ranks, slowest first" />
    </div>
  );
}

function StepHeatmap({ d, dark }: { d: DistRanksReply; dark: boolean }) {
  const [order, setOrder] = useState<"slowest" | "rank">("slowest");
  const h = useMemo(() => stepHeatmap(d.step_matrix, order === "slowest" ? d.order : undefined), [d, order]);
  const workers = useMemo(() => new Map(d.ranks.map((r) => [r.rank, r.worker])), [d.ranks]);
  const flagged = useMemo(() => new Set(outliers(d.ranks).map((r) => r.rank)), [d.ranks]);
  const shown = fitCount(h.ranks.length, 560, ROW_PX);
  const option = useMemo(() => stepHeatmapOption(h, workers, flagged, shown, dark), [h, workers, flagged, shown, dark]);
  if (!h.ranks.length || !h.steps.length) return <Empty title="No steps">No rank has a profiled step (ProfilerStep#N) to compare.</Empty>;
  const height = shown * ROW_PX + 110;
  return (
    <div className="step-heatmap" data-ranks={h.ranks.join(",")} data-steps={h.steps.join(",")} data-cells={h.cells.length} data-missing={h.missing} data-shown={shown}>
      <div className="controls">
        <Tabs label="Heatmap order" value={order} onChange={setOrder} options={[{ value: "slowest", label: "Slowest first" }, { value: "rank", label: "By rank" }]} />
        <span className="muted">
          {fmtCount(h.ranks.length)} ranks × {fmtCount(h.steps.length)} steps, one cell each (none merged)
          {h.missing ? `; ${fmtCount(h.missing)} cells empty: the rank has no such step` : ""}
          {d.step_matrix.truncated ? `; only the first ${fmtCount(h.steps.length)} steps are shown (the server sends at most 1,000,000 cells)` : ""}
          {shown < h.ranks.length ? `; ${fmtCount(shown)} ranks in view, the slider on the right moves and widens it` : ""}.
        </span>
      </div>
      <Chart option={option} dark={dark} height={height} ariaLabel="Step time per rank and step" />
    </div>
  );
}

export function RanksSection({ d, run, dark }: { d: DistRanksReply; run: string; dark: boolean }) {
  const rows = useMemo(() => orderRanks(d), [d]);
  const cols = useMemo(() => rankCols(), []);
  const flagged = useMemo(() => outliers(rows), [rows]);
  const clock = clockNote(rows);
  if (!rows.length) return <Empty title="No ranks">{d.notes?.[0] ?? "No rank could be summarized."}</Empty>;
  return (
    <div className="ranks-section">
      <Notes notes={d.notes} />
      {clock && (
        <div className="notes-inline clock-note" title={Object.entries(METHOD_WORDS).map(([k, v]) => `${k}: ${v}`).join("\n")}>
          {clock}
        </div>
      )}
      <RankBars rows={rows} dark={dark} />
      <OutlierList rows={flagged} />
      <h3 className="sub-head">Step time per rank and step</h3>
      <StepHeatmap d={d} dark={dark} />
      <DataTable
        rows={rows}
        cols={cols}
        exportName={[run, "ranks"]}
        filterPlaceholder="Filter workers…"
        caption="Per rank, slowest first: each figure is the mean per step"
      />
    </div>
  );
}
