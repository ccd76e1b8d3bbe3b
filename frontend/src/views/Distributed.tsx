// Distributed: the ranks slowest first with their outliers, clock corrections and a
// step × rank heatmap (distributed/Ranks), per rank computation / communication /
// overlap / other (stacked bars), communication split into waiting for the slowest rank
// vs transferring, each collective instance across the ranks and the point-to-point
// bytes matrix (distributed/Instances), the collectives per rank (bytes, bandwidth), and
// the devices of each worker. Every figure says whether it is one step, a mean per step
// or a total over the steps. Sized for 1,024 ranks: long rank axes get a slider.

import { useMemo, useState, type ReactNode } from "react";
import type { ViewProps } from "./props";
import { useApi } from "../api/hooks";
import type { StragglersReply } from "../api/types/why";
import type { CommOpRow, DistCommOpsReply, DistGpuInfoReply, DistInfo, DistOverlapReply, DistRanksReply, DistWaitReply, OverlapRow, WaitRow } from "../api/types/distributed";
import { Chart, TOOLTIP_BASE, axisTooltip } from "../components/Chart";
import { DataTable, type Col } from "../components/DataTable";
import { Empty, KeyValues, Loaded, Notes, Section, Select, Tabs } from "../components/common";
import { Name } from "../components/Name";
import { fmtBytes, fmtDuration } from "../util/format";
import { stackedExtent, valueAxis } from "../util/ticks";
import { shownCols, timeCols } from "./distributed/columns";
import { filterRanks, orderRanks, rankRanges, type RankFilter } from "./distributed/data";
import { fmtGBps, InstancesTable, MatrixSection } from "./distributed/Instances";
import { LateArrivalsSection } from "./distributed/LateArrivals";
import { RanksSection } from "./distributed/Ranks";

export { fmtGBps };

/** Ranks listed one per line in the Job box up to this many; beyond, in ranges. */
const LIST_RANKS = 16;

function InfoBox({ info }: { info: DistInfo }) {
  const many = info.ranks.length > LIST_RANKS;
  const excluded = info.excluded ?? [];
  return (
    <KeyValues
      items={[
        ["Backend", info.backend ?? "unknown"],
        ["World size", info.world_size != null ? String(info.world_size) : "unknown"],
        ["Ranks with traces", (many ? `${info.ranks.length}: ${rankRanges(info.ranks)}` : info.ranks.join(", ")) || "none"],
        ...(info.missing_ranks.length ? [["Missing ranks", rankRanges(info.missing_ranks)] as [string, string]] : []),
        ...(excluded.length
          ? [["Excluded", <ul className="plain excluded">{excluded.map((x, i) => <li key={i}>rank {x.rank ?? "?"} <Name className="mono" text={x.worker} />: {x.reason}</li>)}</ul>] as [string, ReactNode]]
          : []),
        ...(many ? [] : Object.entries(info.workers).map(([r, w]): [string, ReactNode] => [`Rank ${r}`, <><Name text={w} /> · {info.device_words[r] ?? ""} · measured on {info.measured_on[r] ?? "?"}</>])),
      ]}
    />
  );
}

/** The straggler sentence first (distributed/stragglers' verdict): who arrives last, who
 * waits most and for whom, the ranks without a trace once as ranges. */
function DistVerdictLine({ run, span }: { run: string; span?: string }) {
  const st = useApi<StragglersReply>("distributed/stragglers", { run, span });
  const v = st.data?.verdict;
  if (!v) return null;
  return <p className="diagnosis" aria-label="Distributed verdict"><Name text={v.sentence} /></p>;
}

/** "total over 2 steps" when every rank has the same steps, else "total over each rank's steps". */
export function totalLabel(rows: { steps?: number }[]): string {
  const counts = [...new Set(rows.map((r) => r.steps ?? 0))];
  return counts.length === 1 ? `total over ${counts[0]} step${counts[0] === 1 ? "" : "s"}` : "total over each rank's steps";
}

/** Bars shown at once on a category axis; beyond, a slider under the chart moves the window. */
const BARS_IN_VIEW = 32;

function stackedBars<T extends { rank: number; step?: number }>(rows: T[], series: { key: keyof T; name: string; color: string }[], perStep: boolean, unit: string) {
  const cats = rows.map((r) => (perStep ? `rank ${r.rank} · step ${r.step}` : `rank ${r.rank}`));
  const zoom = cats.length > BARS_IN_VIEW;
  return {
    dataZoom: zoom ? [{ type: "slider", xAxisIndex: 0, startValue: 0, endValue: BARS_IN_VIEW - 1, bottom: 6, height: 16, showDetail: false }] : [],
    tooltip: { ...TOOLTIP_BASE, trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip((v) => fmtDuration(v)) },
    legend: { top: 0 },
    grid: { left: 80, right: 20, top: 36, bottom: (perStep ? 70 : 40) + (zoom ? 26 : 0) },
    xAxis: { type: "category", data: cats, axisLabel: { rotate: perStep ? 30 : 0 } },
    yAxis: valueAxis(...stackedExtent(series.map((s) => rows.map((r) => Number(r[s.key] ?? 0)))), "duration", { extra: { name: unit } }),
    series: series.map((s) => ({
      name: s.name,
      type: "bar",
      stack: "t",
      barMaxWidth: 160,
      itemStyle: { color: s.color },
      emphasis: { focus: "series" },
      data: rows.map((r) => Number(r[s.key] ?? 0)),
    })),
  };
}

/** One line of the figures table: a rank's (or a rank's step's) overlap and wait figures. */
export type FigureRow = OverlapRow & { wait_ns: number | null; transfer_ns: number | null };

/** Joins the overlap rows with the wait rows of the same rank (and step). */
export function joinFigures(overlap: OverlapRow[], wait: WaitRow[]): FigureRow[] {
  const key = (r: { rank: number; step?: number }) => `${r.rank}/${r.step ?? ""}`;
  const byKey = new Map(wait.map((w) => [key(w), w]));
  return overlap.map((r) => {
    const w = byKey.get(key(r));
    return { ...r, wait_ns: w?.wait_ns ?? null, transfer_ns: w?.transfer_ns ?? null };
  });
}

export function figureCols(perStep: boolean, unit: string): Col<FigureRow>[] {
  return [
    { id: "rank", header: "Rank", value: (r) => r.rank, kind: "count" },
    { id: "worker", header: "Worker", value: (r) => r.worker, nowrap: true, render: (r) => <Name text={r.worker} /> },
    perStep
      ? { id: "step", header: "Step", value: (r) => r.step ?? null, kind: "count" }
      : { id: "steps", header: "Steps", value: (r) => r.steps ?? null, kind: "count" },
    ...timeCols<FigureRow>(` (${unit})`),
  ];
}

/** Each rank's communication here and in the Overview; folded away past a few ranks. */
function CommLines({ rows }: { rows: OverlapRow[] }) {
  const list = (
    <ul className="plain comm-lines" aria-label="Communication here and in the Overview">
      {rows.map((r) => (
        <li key={r.rank}>
          <b>rank {r.rank}</b>: {r.communication_note}
        </li>
      ))}
    </ul>
  );
  if (rows.length <= 8) return list;
  return (
    <details className="comm-lines-fold">
      <summary>Communication here and in the Overview, per rank ({rows.length} ranks)</summary>
      {list}
    </details>
  );
}

/** All ranks, the slowest rank, the 8 slowest, or the rank that arrives last: the figures,
 * bars and collectives below follow it (the Ranks section above shows every rank). */
function RankFilterTabs({ ranks, lateRank, value, onChange }: { ranks: DistRanksReply | null; lateRank: number | null; value: RankFilter; onChange: (v: RankFilter) => void }) {
  const order = ranks ? orderRanks(ranks) : [];
  if (order.length < 2) return null;
  const options: { value: RankFilter; label: string }[] = [
    { value: "all", label: `All ${order.length} ranks` },
    { value: "slowest", label: `Slowest rank (rank ${order[0].rank})` },
    ...(order.length > 8 ? [{ value: "slowest8" as RankFilter, label: "8 slowest" }] : []),
    ...(lateRank != null ? [{ value: "late" as RankFilter, label: `Arrives last (rank ${lateRank})` }] : []),
  ];
  return <Tabs label="Ranks shown" value={value} onChange={onChange} options={options} />;
}

export function DistributedView({ sel, dark }: ViewProps) {
  const p = { run: sel.run, span: sel.span };
  const ranks = useApi<DistRanksReply>("distributed/ranks", p);
  const overlap = useApi<DistOverlapReply>("distributed/overlap", p);
  const wait = useApi<DistWaitReply>("distributed/waittime", p);
  const ops = useApi<DistCommOpsReply>("distributed/commops", p);
  const gpu = useApi<DistGpuInfoReply>("distributed/gpuinfo", p);
  const [perStep, setPerStep] = useState<"total" | "step">("total");
  const [rank, setRank] = useState("all");
  const [rankFilter, setRankFilter] = useState<RankFilter>("all");
  const lateRank = useApi<StragglersReply>("distributed/stragglers", p).data?.verdict?.late?.rank ?? null;
  const keep = useMemo(() => filterRanks(ranks.data, rankFilter, lateRank), [ranks.data, rankFilter, lateRank]);
  const kept = <T extends { rank: number }>(rows: T[]): T[] => (keep ? rows.filter((r) => keep.has(r.rank)) : rows);

  const unit = perStep === "step" ? "per step" : totalLabel(overlap.data?.ranks ?? []);
  const overlapOpt = useMemo(() => {
    if (!overlap.data) return null;
    const rows = kept(perStep === "step" ? overlap.data.steps : overlap.data.ranks);
    // computation and communication include their overlap: stack the disjoint parts
    // (an unknown overlap stacks the two whole)
    const disjoint = rows.map((r) => ({
      ...r,
      comp_only: Math.max(0, r.computation_ns - (r.overlap_ns ?? 0)),
      comm_only: Math.max(0, r.communication_ns - (r.overlap_ns ?? 0)),
    }));
    return stackedBars(disjoint, [
      { key: "comp_only", name: "Computation (not overlapped)", color: "#5470c6" },
      { key: "overlap_ns", name: "Overlapped", color: "#91cc75" },
      { key: "comm_only", name: "Communication (not overlapped)", color: "#ee6666" },
      { key: "other_ns", name: "Other", color: "#aaaaaa" },
    ], perStep === "step", unit);
  }, [overlap.data, perStep, unit, keep]);

  const waitOpt = useMemo(() => {
    if (!wait.data) return null;
    const rows = kept(perStep === "step" ? wait.data.steps : wait.data.ranks);
    return stackedBars(rows, [
      { key: "transfer_ns", name: "Data transfer", color: "#73c0de" },
      { key: "wait_ns", name: "Synchronizing (waiting)", color: "#fc8452" },
    ], perStep === "step", unit);
  }, [wait.data, perStep, unit, keep]);

  const figures = useMemo(
    () => (overlap.data ? kept(joinFigures(perStep === "step" ? overlap.data.steps : overlap.data.ranks, (perStep === "step" ? wait.data?.steps : wait.data?.ranks) ?? [])) : []),
    [overlap.data, wait.data, perStep, keep],
  );
  // columns with nothing to say for these ranks (e.g. overlap on two clocks) are hidden
  const figCols = useMemo(() => shownCols(figureCols(perStep === "step", unit), figures), [perStep, unit, figures]);
  const opsTotal = totalLabel(overlap.data?.ranks ?? []);

  const opCols: Col<CommOpRow>[] = [
    { id: "rank", header: "Rank", value: (r) => r.rank, kind: "count" },
    { id: "name", header: "Collective", value: (r) => r.name, width: 180 },
    { id: "pg", header: "Process group", value: (r) => r.pg_name },
    { id: "group", header: "Group size", value: (r) => r.group_size, kind: "count", title: "Ranks in the process group (n of the bus bandwidth)" },
    { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count", title: `Calls, ${opsTotal}` },
    { id: "bytes", header: "Data", value: (r) => r.bytes, kind: "bytes", title: `This rank's input messages, ${opsTotal}` },
    { id: "out_bytes", header: "Data out", value: (r) => r.out_bytes, kind: "bytes", title: `This rank's output messages, ${opsTotal}` },
    { id: "total", header: "Total time", value: (r) => r.total_ns, kind: "us", title: `Time of the calls, ${opsTotal}` },
    { id: "avg", header: "Mean time", value: (r) => r.avg_ns, kind: "us", title: "Per call" },
    { id: "algbw", header: "algbw (GB/s)", value: (r) => r.algbw_gbps, kind: "num", render: (r) => fmtGBps(r.algbw_gbps), title: "Algorithm bandwidth (nccl-tests' algbw): size / time, over the calls" },
    { id: "busbw", header: "busbw (GB/s)", value: (r) => r.busbw_gbps, kind: "num", render: (r) => fmtGBps(r.busbw_gbps), title: "Bus bandwidth (nccl-tests' busbw): algbw × 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all) or 1; – when n or the size is unknown" },
    { id: "time_on", header: "Timed on", value: (r) => r.time_on, title: "device: the calls' kernels; host: the host calls (no communication kernels in the trace)" },
    { id: "wait", header: "Waiting", value: (r) => r.wait_ns, kind: "us", title: `For the slowest rank, ${opsTotal}` },
    { id: "transfer", header: "Transfer", value: (r) => r.transfer_ns, kind: "us", title: opsTotal },
  ];

  return (
    <div className="view">
      <DistVerdictLine run={sel.run} span={sel.span} />
      <Section title="Ranks">
        <Loaded state={ranks}>{(d) => <RanksSection d={d} run={sel.run} dark={dark} />}</Loaded>
      </Section>
      <div className="controls">
        <Tabs label="Per rank or per step" value={perStep} onChange={setPerStep} options={[{ value: "total", label: "Per rank" }, { value: "step", label: "Per rank and step" }]} />
        <RankFilterTabs ranks={ranks.data} lateRank={lateRank} value={rankFilter} onChange={setRankFilter} />
      </div>
      <Loaded state={overlap}>
        {(o) => (
          <>
            <Notes notes={o.notes} />
            <div className="grid-1-1">
              <Section title="Job">
                <InfoBox info={o.info} />
              </Section>
              <Section title="Devices">
                <Loaded state={gpu}>
                  {(g) => (
                    <ul className="plain scroll-list">
                      {g.workers.map((w) => (
                        <li key={w.worker}>
                          <b>rank {w.rank}</b> <Name className="mono" text={w.worker} />:{" "}
                          {w.devices.length
                            ? <Name text={w.devices.map((dv) => `${dv.kind} ${dv.id}${dv.name ? ` ${dv.name}` : ""}${dv.total_memory ? ` (${fmtBytes(dv.total_memory)})` : ""}`).join("; ")} />
                            : "CPU only"}
                        </li>
                      ))}
                    </ul>
                  )}
                </Loaded>
              </Section>
            </div>
            <Section title="Computation and communication">
              {o.ranks.some((r) => r.communication_note) && <CommLines rows={o.ranks} />}
              {overlapOpt && (o.ranks.length ? <Chart option={overlapOpt} dark={dark} height={320} ariaLabel="Computation and communication per rank" /> : <Empty title="No ranks" />)}
              {o.ranks.length > 0 && (
                <DataTable
                  key={perStep}
                  rows={figures}
                  cols={figCols}
                  exportName={[sel.run, perStep === "step" ? "overlap-per-step" : "overlap-per-rank"]}
                  filterPlaceholder="Filter workers…"
                  caption={perStep === "step" ? "Per rank and step: each figure is one step" : `Per rank: each figure is the ${unit}`}
                />
              )}
            </Section>
          </>
        )}
      </Loaded>
      <Section title="Communication: waiting vs transfer">
        <Loaded state={wait}>
          {(w) => (
            <>
              <Notes notes={w.notes} />
              {waitOpt && w.ranks.length ? <Chart option={waitOpt} dark={dark} height={300} ariaLabel="Waiting vs transfer per rank" /> : <Empty title="No collectives">No communication operators were found in the traces.</Empty>}
            </>
          )}
        </Loaded>
      </Section>
      <Section title="Late arrivals">
        <LateArrivalsSection run={sel.run} span={sel.span} dark={dark} />
      </Section>
      <Section title="Collective instances">
        <InstancesTable run={sel.run} span={sel.span} />
        <h3 className="sub-head">Point-to-point bytes between ranks</h3>
        <MatrixSection run={sel.run} span={sel.span} dark={dark} />
      </Section>
      <Section
        title="Collectives"
        actions={
          ops.data && (
            <Select
              label="Rank"
              value={rank}
              options={[{ value: "all", label: "All ranks" }, ...[...new Set(ops.data.rows.map((r) => r.rank))].sort((a, b) => a - b).map((r) => ({ value: String(r), label: `rank ${r}` }))]}
              onChange={setRank}
            />
          )
        }
      >
        <Loaded state={ops}>
          {(d) => (
            <>
              <Notes notes={d.notes} />
              <DataTable
                rows={kept(rank === "all" ? d.rows : d.rows.filter((r) => String(r.rank) === rank))}
                cols={shownCols(opCols, kept(d.rows), ["rank", "name"])}
                exportName={[sel.run, "collectives"]}
                initialSort={{ id: "total", desc: true }}
                filterPlaceholder="Filter collectives…"
                emptyText="No collectives."
                caption={`Per rank and collective, ${opsTotal}; bandwidth in GB/s (nccl-tests' algbw and busbw)`}
              />
            </>
          )}
        </Loaded>
      </Section>
    </div>
  );
}
