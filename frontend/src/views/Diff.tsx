// Diff: two sides (run / worker / span each; worker "All" = every worker of the span),
// baseline A and experiment B. First what changed in the step-time breakdown (the cause of
// a faster or slower step: a DataLoader, a runtime, ...), then per-step averages of
// operators, kernels and modules, with deltas B − A and a chart of the largest changes.
// Every table starts in the API's order, the largest change first whatever its sign, and
// its Δ columns sort by size: a saving is as much a change as a loss.

import { useMemo, useState } from "react";
import type { ViewProps } from "./props";
import { useApi } from "../api/hooks";
import type { DiffBreakdownRow, DiffReply, DiffRow } from "../api/types/diff";
import { Chart, TOOLTIP_BASE, shortName } from "../components/Chart";
import { DataTable, type Col } from "../components/DataTable";
import { Empty, Loaded, Notes, Section, Select, Stat, Tabs } from "../components/common";
import { TrustBadge } from "../components/TrustBadge";
import { setState } from "../state/store";
import { showBidiControls } from "../util/bidi";
import { nameHtml, tooltipLine } from "../util/escape";
import { fmtDeltaDuration, fmtDuration, fmtPct } from "../util/format";
import { extentOf, valueAxis } from "../util/ticks";

type Metric = "host_self_ns" | "host_total_ns" | "device_self_ns" | "device_total_ns" | "total_ns";

interface Side {
  run: string;
  workers: string[];
  spans: string[];
  /** resolved: "All" (every worker) or a worker name */
  worker: string | undefined;
  span: string | undefined;
}

/** A side's worker / span choices and the values in effect (defaults filled in). */
function useSide(run: string, worker: string | undefined, span: string | undefined, defaultSpan: "latest" | "oldest"): Side {
  const workers = useApi<string[]>(run ? "workers" : null, { run });
  const wl = workers.data ?? [];
  const w = worker === "All" || (worker && wl.includes(worker)) ? worker : wl.length > 1 ? "All" : wl[0];
  const spans = useApi<string[]>(run ? "spans" : null, { run, worker: w === "All" ? undefined : w });
  const sl = spans.data ?? [];
  const s = span && sl.includes(span) ? span : defaultSpan === "oldest" ? sl[0] : sl[sl.length - 1];
  return { run, workers: wl, spans: sl, worker: w, span: s };
}

function SidePicker({ label, runs, side, onChange }: {
  label: string;
  runs: string[];
  side: Side;
  onChange: (p: { run?: string; worker?: string; span?: string }) => void;
}) {
  const { run, workers, spans, worker, span } = side;
  return (
    <div className="side-picker">
      <span className="side-label">{label}</span>
      <Select label="Run" name={`Run of ${label}`} value={run} options={runs} onChange={(v) => onChange({ run: v, worker: undefined, span: undefined })} />
      <Select label="Worker" name={`Worker of ${label}`} value={worker ?? ""} options={[...(workers.length > 1 ? ["All"] : []), ...workers]} onChange={(v) => onChange({ run, worker: v, span: undefined })} />
      <Select label="Span" name={`Span of ${label}`} value={span ?? ""} options={spans.length ? spans : [""]} onChange={(v) => onChange({ run, worker, span: v })} />
      {/* each side's trust report (all workers: one report per trace, so none for the merge) */}
      {run && span && worker && worker !== "All" && <TrustBadge sel={{ run, worker, span }} />}
    </div>
  );
}

function metricCols(prefix: string, header: string, kind: "us" | "count"): Col<DiffRow>[] {
  return [
    { id: `${prefix}_a`, header: `${header} A`, value: (r) => r[`${prefix}_a`] as number | null, kind: kind === "count" ? "num" : "us" },
    { id: `${prefix}_b`, header: `${header} B`, value: (r) => r[`${prefix}_b`] as number | null, kind: kind === "count" ? "num" : "us" },
    { id: `${prefix}_delta`, header: `Δ ${header}`, value: (r) => r[`${prefix}_delta`] as number | null, kind: kind === "count" ? "num" : "delta_us", byMagnitude: true },
  ];
}

const BREAKDOWN_COLS: Col<DiffBreakdownRow>[] = [
  { id: "label", header: "Category", value: (r) => r.label, width: 140 },
  { id: "time_ns_a", header: "A", value: (r) => r.time_ns_a, kind: "us", title: "ns per step of A" },
  { id: "time_ns_b", header: "B", value: (r) => r.time_ns_b, kind: "us", title: "ns per step of B" },
  { id: "time_ns_delta", header: "Δ", value: (r) => r.time_ns_delta, kind: "delta_us", byMagnitude: true, title: "B − A per step" },
  { id: "delta_pct", header: "Δ of A's step", value: (r) => r.delta_pct, kind: "pct", byMagnitude: true, title: "B − A as a share of A's step time" },
];

const SIDE_COLORS = { a: "#91a7d0", b: "#5470c6" };

/** Per category (API order: largest |Δ| at the top), A's and B's time per step and the delta
 * (red: B spends more, green: less). */
export function breakdownChart(rows: DiffBreakdownRow[]) {
  const shown = rows.filter((r) => r.time_ns_a || r.time_ns_b).reverse(); // a category axis draws bottom-up
  const bar = (name: string, color: string, value: (r: DiffBreakdownRow) => number | null, itemColor?: (r: DiffBreakdownRow) => string) => ({
    name,
    type: "bar",
    itemStyle: { color },
    data: shown.map((r) => ({ value: value(r), itemStyle: itemColor ? { color: itemColor(r) } : undefined })),
  });
  const deltaColor = (r: DiffBreakdownRow) => (Number(r.time_ns_delta) > 0 ? "#ee6666" : "#3ba272");
  return {
    count: shown.length,
    option: {
      tooltip: {
        ...TOOLTIP_BASE,
        trigger: "axis",
        axisPointer: { type: "shadow" },
        formatter: (ps: any[]) => {
          const r = shown[ps[0]?.dataIndex ?? 0];
          return `<div class="tt-title">${nameHtml(r.label)}</div>` +
            tooltipLine(SIDE_COLORS.a, "A", fmtDuration(r.time_ns_a)) + "<br>" +
            tooltipLine(SIDE_COLORS.b, "B", fmtDuration(r.time_ns_b)) + "<br>" +
            tooltipLine(deltaColor(r), "B − A", `${fmtDeltaDuration(r.time_ns_delta)}${r.delta_pct != null ? ` (${fmtPct(r.delta_pct)} of A's step)` : ""}`);
        },
      },
      legend: { top: 0, data: ["A", "B", "B − A"] },
      grid: { left: 12, right: 40, top: 30, bottom: 30, containLabel: true },
      xAxis: valueAxis(...extentOf(shown.flatMap((r) => [r.time_ns_a, r.time_ns_b, r.time_ns_delta])), "duration"),
      yAxis: { type: "category", data: shown.map((r) => showBidiControls(r.label)) },
      series: [
        bar("A", SIDE_COLORS.a, (r) => r.time_ns_a),
        bar("B", SIDE_COLORS.b, (r) => r.time_ns_b),
        bar("B − A", "#888", (r) => r.time_ns_delta, deltaColor),
      ],
    },
  };
}

function BreakdownSection({ rows, dark }: { rows: DiffBreakdownRow[]; dark: boolean }) {
  const chart = useMemo(() => breakdownChart(rows), [rows]);
  return (
    <Section title="Step time breakdown (per step)">
      {chart.count ? <Chart option={chart.option} dark={dark} height={Math.max(180, chart.count * 48 + 70)} ariaLabel="Step time breakdown, A and B" /> : <div className="muted">Neither side has steps to break down.</div>}
      <DataTable rows={rows} cols={BREAKDOWN_COLS} exportName={["diff", "breakdown"]} rowKey={(r) => r.category} emptyText="Neither side has steps." />
    </Section>
  );
}

const SIDE: Record<string, string> = { a: "A only", b: "B only", both: "both" };

/**
 * A module path shortened from the left, at a "/" where one fits: the leaf names the
 * module ("…/BasicBlock_0/Conv2d_1"), its ancestors only place it. The tooltip has it whole.
 */
export function shortPath(path: string, max = 38): string {
  if (path.length <= max) return path;
  const tail = path.slice(path.length - (max - 1));
  const cut = tail.indexOf("/");
  return "…" + (cut >= 0 && cut < tail.length - 1 ? tail.slice(cut) : tail);
}

export function deltaChart(rows: DiffRow[], metric: Metric, label: (r: DiffRow) => string, short: (s: string) => string = (s) => shortName(s, 38)) {
  const key = `${metric}_delta`;
  const top = rows
    .filter((r) => typeof r[key] === "number" && r[key] !== 0)
    .sort((x, y) => Math.abs(Number(y[key])) - Math.abs(Number(x[key])))
    .slice(0, 15)
    .reverse();
  return {
    top: top.length,
    option: {
      tooltip: {
        ...TOOLTIP_BASE,
        trigger: "item",
        formatter: (p: any) => {
          const r = top[p.dataIndex];
          return `<div class="tt-title tt-wrap">${nameHtml(label(r))}</div>` +
            tooltipLine("#888", "A", fmtDuration(Number(r[`${metric}_a`]))) + "<br>" +
            tooltipLine("#888", "B", fmtDuration(Number(r[`${metric}_b`]))) + "<br>" +
            tooltipLine(String(p.color), "B − A", fmtDeltaDuration(Number(r[key])));
        },
      },
      // the labels take the room they need (up to 250 px), not a fixed 260 px
      grid: { left: 12, right: 40, top: 10, bottom: 30, containLabel: true },
      xAxis: valueAxis(...extentOf(top.map((r) => Number(r[key]))), "duration", { signed: true }),
      yAxis: { type: "category", data: top.map((r) => short(showBidiControls(label(r)))), axisLabel: { width: 250, overflow: "truncate" } },
      series: [{
        type: "bar",
        data: top.map((r) => ({ value: Number(r[key]), itemStyle: { color: Number(r[key]) > 0 ? "#ee6666" : "#3ba272" } })),
      }],
    },
  };
}

type PathRow = DiffRow & {
  _children: PathRow[];
  _label: string;
};

export function nestPaths(rows: DiffRow[]): PathRow[] {
  const byPath = new Map<string, PathRow>();
  for (const r of rows) byPath.set(String(r.path), { ...r, _children: [], _label: String(r.path).split("/").pop() ?? String(r.path) });
  const roots: PathRow[] = [];
  for (const r of byPath.values()) {
    const p = String(r.path);
    const cut = p.lastIndexOf("/");
    const parent = cut > 0 ? byPath.get(p.slice(0, cut)) : undefined;
    if (parent) parent._children.push(r);
    else roots.push(r);
  }
  return roots;
}

export function DiffView({ st, sel, dark, runs }: ViewProps & { runs: string[] }) {
  const [table, setTable] = useState<"operators" | "kernels" | "modules">("operators");
  const [metric, setMetric] = useState<Metric>("host_self_ns");
  const a = useSide(sel.run, st.worker, st.span, "latest");
  // B defaults to another span of A's run (the usual before/after question), else another run
  const other = runs.find((r) => r !== sel.run) ?? sel.run;
  const erun = st.erun && runs.includes(st.erun) ? st.erun : a.spans.length > 1 ? sel.run : other;
  // comparing a run with itself: B defaults to its oldest span, A to its latest
  const b = useSide(erun, st.eworker, st.espan, erun === sel.run ? "oldest" : "latest");
  const ready = !!(sel.run && erun && a.span && b.span);
  const params = {
    run: sel.run,
    worker: a.worker,
    span: a.span,
    exp_run: erun,
    exp_worker: b.worker,
    exp_span: b.span,
  };
  const diff = useApi<DiffReply>(ready ? "diff" : null, params);
  const effMetric: Metric = table === "kernels" ? "total_ns" : metric === "total_ns" ? "host_self_ns" : metric;

  const chart = useMemo(() => {
    if (!diff.data) return null;
    const rows = table === "operators" ? diff.data.operators : table === "kernels" ? diff.data.kernels : diff.data.modules;
    return table === "modules"
      ? deltaChart(rows, effMetric, (r) => String(r.path), shortPath)
      : deltaChart(rows, effMetric, (r) => String(r.name));
  }, [diff.data, table, effMetric]);

  const opCols: Col<DiffRow>[] = [
    { id: "name", header: "Operator", value: (r) => String(r.name ?? ""), width: 220 },
    { id: "side", header: "In", value: (r) => SIDE[r.side] ?? r.side, nowrap: true },
    ...metricCols("calls", "Calls", "count"),
    ...metricCols("host_self_ns", "Host self", "us"),
    ...metricCols("host_total_ns", "Host total", "us"),
    ...metricCols("device_self_ns", "Device self", "us"),
    ...metricCols("device_total_ns", "Device total", "us"),
  ];
  const kCols: Col<DiffRow>[] = [
    { id: "name", header: "Kernel", value: (r) => String(r.name ?? ""), width: 260 },
    { id: "side", header: "In", value: (r) => SIDE[r.side] ?? r.side, nowrap: true },
    ...metricCols("calls", "Calls", "count"),
    ...metricCols("total_ns", "Time", "us"),
  ];
  const mCols: Col<PathRow>[] = [
    { id: "name", header: "Module", value: (r) => r._label, width: 220 },
    { id: "path", header: "Path", value: (r) => String(r.path ?? "") },
    { id: "side", header: "In", value: (r) => SIDE[r.side] ?? r.side, nowrap: true },
    ...(metricCols("calls", "Calls", "count") as Col<PathRow>[]),
    ...(metricCols("host_total_ns", "Host total", "us") as Col<PathRow>[]),
    ...(metricCols("device_total_ns", "Device total", "us") as Col<PathRow>[]),
  ];
  const modTree = useMemo(() => nestPaths(diff.data?.modules ?? []), [diff.data]);

  if (!runs.length) return <Empty title="No runs to compare" />;
  return (
    <div className="view">
      <div className="diff-pickers">
        <SidePicker label="A (baseline)" runs={runs} side={a} onChange={(p) => setState({ run: p.run, worker: p.worker, span: p.span })} />
        <SidePicker label="B (experiment)" runs={runs} side={b} onChange={(p) => setState({ erun: p.run, eworker: p.worker, espan: p.span })} />
      </div>
      <Loaded state={diff}>
        {(d) => {
          const s = d.summary;
          const pct = s.step_time_avg_ns_a && s.step_time_avg_ns_delta != null ? (100 * s.step_time_avg_ns_delta) / s.step_time_avg_ns_a : null;
          return (
            <>
              <Notes notes={d.notes} />
              <div className="stats">
                <Stat label="Average step, A" value={fmtDuration(s.step_time_avg_ns_a, 4)} hint={`${s.num_steps_a ?? "?"} steps in ${s.traces_a} trace(s)`} />
                <Stat label="Average step, B" value={fmtDuration(s.step_time_avg_ns_b, 4)} hint={`${s.num_steps_b ?? "?"} steps in ${s.traces_b} trace(s)`} />
                <Stat label="B − A" value={<span className={s.step_time_avg_ns_delta != null && s.step_time_avg_ns_delta > 0 ? "worse" : "better"}>{fmtDeltaDuration(s.step_time_avg_ns_delta)}{pct !== null ? ` (${pct > 0 ? "+" : ""}${fmtPct(pct)})` : ""}</span>} />
              </div>
              <BreakdownSection rows={d.breakdown ?? []} dark={dark} />
              <div className="controls">
                <Tabs label="Compare" value={table} onChange={setTable} options={[{ value: "operators", label: "Operators" }, { value: "kernels", label: "Kernels" }, { value: "modules", label: "Modules" }]} />
                {table !== "kernels" && (
                  <Select
                    label="Chart"
                    value={metric}
                    onChange={(v) => setMetric(v as Metric)}
                    options={[
                      { value: "host_self_ns", label: "Host self" },
                      { value: "host_total_ns", label: "Host total" },
                      { value: "device_self_ns", label: "Device self" },
                      { value: "device_total_ns", label: "Device total" },
                    ]}
                  />
                )}
                <span className="muted">Per-step averages; Δ = B − A (red: B slower).</span>
              </div>
              <Section title="Largest changes">
                {chart && chart.top ? <Chart option={chart.option} dark={dark} height={Math.max(160, chart.top * 24 + 50)} ariaLabel="Largest changes" /> : <div className="muted">No differences in this measure.</div>}
              </Section>
              <Section title={table === "operators" ? "Operators" : table === "kernels" ? "Kernels" : "Modules"}>
                {table === "operators" && (
                  <DataTable rows={d.operators} cols={opCols} exportName={["diff", "operators"]} filterPlaceholder="Filter operators…" emptyText="No operators on either side." />
                )}
                {table === "kernels" && (
                  <DataTable rows={d.kernels} cols={kCols} exportName={["diff", "kernels"]} filterPlaceholder="Filter kernels…" emptyText="No kernels on either side." />
                )}
                {table === "modules" && (
                  <DataTable
                    rows={modTree}
                    cols={mCols}
                    getSubRows={(r) => (r._children.length ? r._children : undefined)}
                    exportName={["diff", "modules"]}
                    filterPlaceholder="Filter modules…"
                    rowKey={(r) => String(r.path)}
                    emptyText="No module hierarchy on either side."
                  />
                )}
              </Section>
            </>
          );
        }}
      </Loaded>
    </div>
  );
}
