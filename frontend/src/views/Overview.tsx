// Overview: the headline numbers and what bounds the step (the diagnosis) first, then the
// recommendations, then the evidence: the step-time breakdown per step and on average, the
// "why" sections, the device summary and the steps.

import { useMemo } from "react";
import type { ViewProps } from "./props";
import { useApi } from "../api/hooks";
import type { Diagnosis } from "../api/types/diagnosis";
import type { DeviceRow, OverviewReply, Recommendation, Step } from "../api/types/overview";
import { Chart, PALETTE, TOOLTIP_BASE, axisTooltip, pieTooltip } from "../components/Chart";
import { DataTable, type Col } from "../components/DataTable";
import { Empty, KeyValues, Loaded, Notes, Section, Stat } from "../components/common";
import { Name } from "../components/Name";
import { Caveat } from "../components/TrustBadge";
import { setState } from "../state/store";
import { VIEW_IDS, type ViewId } from "../state/url";
import { fmtDuration, fmtPct, fmtWallTime } from "../util/format";
import { STEP_TIME_TITLE } from "../util/labels";
import { openEvent } from "./trace/open";
import { stackedExtent, valueAxis } from "../util/ticks";
import { AnnotationsSection } from "./why/Annotations";
import { CriticalPathSection } from "./why/CriticalPath";
import { IdleTimeSection } from "./why/IdleTime";
import { StepTimeSection } from "./why/StepTime";

const CAT_COLORS: Record<string, string> = {
  kernel: "#5470c6",
  memcpy: "#fac858",
  memset: "#fc8452",
  communication: "#9a60b4",
  runtime: "#ee6666",
  dataloader: "#73c0de",
  cpu_exec: "#91cc75",
  other: "#aaaaaa",
};

function BreakdownCharts({ data, dark }: { data: OverviewReply; dark: boolean }) {
  const labels = data.breakdown.labels;
  const cats = Object.keys(labels);
  const steps = data.breakdown.ns.filter((r) => Number(r.step) !== -1);
  const avg = data.breakdown.ns.find((r) => Number(r.step) === -1);
  const rows = avg ? [...steps, avg] : steps;
  const barOption = useMemo(() => ({
    tooltip: { ...TOOLTIP_BASE, trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip((v) => fmtDuration(v)) },
    legend: { type: "scroll", top: 0 },
    grid: { left: 70, right: 20, top: 40, bottom: 40 },
    xAxis: { type: "category", data: rows.map((r) => (Number(r.step) === -1 ? "Average" : String(r.step))), name: "Step", nameLocation: "middle", nameGap: 26 },
    yAxis: valueAxis(...stackedExtent(cats.map((c) => rows.map((r) => Number(r[`${c}_ns`] ?? 0)))), "duration"),
    series: cats.map((c, i) => ({
      name: labels[c],
      type: "bar",
      stack: "step",
      emphasis: { focus: "series" },
      itemStyle: { color: CAT_COLORS[c] ?? PALETTE[i % PALETTE.length] },
      data: rows.map((r, j) => ({
        value: Number(r[`${c}_ns`] ?? 0),
        itemStyle: j === steps.length && avg ? { opacity: 0.75, decal: { symbol: "rect", dashArrayX: [1, 0], dashArrayY: [2, 3], rotation: -0.7 } } : undefined,
      })),
    })),
  }), [data]); // eslint-disable-line react-hooks/exhaustive-deps

  const pieOption = useMemo(() => ({
    tooltip: { ...TOOLTIP_BASE, trigger: "item", formatter: pieTooltip((v) => fmtDuration(v)) },
    series: [{
      type: "pie",
      radius: ["35%", "62%"],
      center: ["50%", "50%"],
      // Slices under ~3% get no label (their names would pile up); the legend beside the
      // bars and the tooltip still name them. Explicit line height: two lines per label.
      minShowLabelAngle: 10,
      avoidLabelOverlap: true,
      labelLayout: { hideOverlap: true },
      label: { lineHeight: 15, formatter: (p: { name: string; percent: number }) => `${p.name}\n${p.percent.toFixed(1)}%` },
      data: cats
        .map((c) => ({ name: labels[c], value: Number(data.summary.average_ns[c] ?? 0), itemStyle: { color: CAT_COLORS[c] } }))
        .filter((d) => d.value > 0),
    }],
  }), [data]); // eslint-disable-line react-hooks/exhaustive-deps

  if (!rows.length) return <Empty title="No steps to break down">{data.notes[0] ?? "The trace has no ProfilerStep ranges and no events to use as one step."}</Empty>;
  return (
    <div className="grid-2-1">
      <Chart option={barOption} dark={dark} height={340} ariaLabel="Step time breakdown per step" />
      <Chart option={pieOption} dark={dark} height={320} ariaLabel="Average step time breakdown" title="Average step" />
    </div>
  );
}

export function RecommendationList({ recs }: { recs: Recommendation[] }) {
  if (!recs.length) return <div className="muted">No recommendations: nothing in this trace matched a known performance pattern.</div>;
  return (
    <ul className="recs">
      {recs.map((r, i) => (
        <li key={r.id + i} className={"rec sev-" + String(r.severity).replace(/[^a-z]/g, "")}>
          <div className="rec-title">
            <span className="sev">{r.severity}</span> <Name text={r.title} />
          </div>
          <div className="rec-text"><Name text={r.text} /></div>
          <div className="rec-actions">
            {r.link?.view && (VIEW_IDS as string[]).includes(r.link.view) && (
              <button type="button" className="small link" onClick={() => setState({ view: r.link!.view as ViewId, q: r.link!.q, kgroup: r.link!.kgroup, find: r.link!.find })}>
                {r.link.q || r.link.find ? `Show ${r.link.q ?? r.link.find} in the ${r.link.view} view` : `Open the ${r.link.view} view`}
              </button>
            )}
            {r.url && /^https?:\/\//.test(r.url) && (
              <a className="rec-link" href={r.url} target="_blank" rel="noopener noreferrer">
                Read more
              </a>
            )}
          </div>
        </li>
      ))}
    </ul>
  );
}

/** The diagnosis under the cards (analysis/diagnosis.py's sentence) and where its figures are. */
function DiagnosisLine({ d, sel }: { d: Diagnosis; sel: ViewProps["sel"] }) {
  const view = d.evidence.view;
  const go = () => {
    if (view && view !== "Overview") { setState({ view: view as ViewId }); return; }
    const title = d.evidence.section;
    const el = title ? [...document.querySelectorAll<HTMLElement>(".card-head h2")].find((h) => h.textContent?.trim().startsWith(title)) : null;
    el?.scrollIntoView({ behavior: "smooth", block: "start" });
  };
  return (
    <p className="diagnosis" aria-label="Diagnosis">
      <strong>{d.label}:</strong> <Name text={d.sentence} />
      {(view && view !== "Overview") || d.evidence.section ? (
        <> <button type="button" className="small link" onClick={go}>{view && view !== "Overview" ? `Open the ${view} view` : `See ${d.evidence.section}`}</button></>
      ) : null}
      {d.evidence.event_ids?.length ? (
        <> <button type="button" className="small link" onClick={() => void openEvent(sel, d.evidence.event_ids![0])} title={`The longest of the events behind it${d.evidence.step != null ? `, in step ${d.evidence.step}` : ""}`}>Show the longest in the trace</button></>
      ) : null}
    </p>
  );
}

/** What the device sections call the trace's accelerator ("GPU", "XPU", ...); "Device" on a
 * CPU-only trace, whose device_word is "CPU": whether there is one is device_kinds, not the word. */
export function acceleratorWord(d: Pick<OverviewReply, "device_word" | "device_kinds"> | null | undefined): string {
  return d?.device_kinds?.length ? d.device_word : "Device";
}

export function OverviewView({ sel, dark }: ViewProps) {
  const state = useApi<OverviewReply>("overview", sel);
  return (
    <Loaded state={state}>
      {(d) => {
        const dw = acceleratorWord(d);
        const devCols: Col<DeviceRow>[] = [
          { id: "device", header: dw, value: (r) => `${r.word ?? dw} ${r.device}` },
          { id: "name", header: "Name", value: (r) => r.name ?? "" },
          { id: "mem", header: "Memory", value: (r) => r.memory_bytes, kind: "bytes" },
          { id: "cc", header: "Compute capability", value: (r) => r.compute_capability ?? "" },
          { id: "sms", header: "SMs", value: (r) => r.num_sms, kind: "count" },
          { id: "kernels", header: "Kernels", value: (r) => r.kernels, kind: "count" },
          // "Kernel busy", not "Busy": the idle-time section's Busy counts copies and fills too (one label, one definition)
          { id: "busy", header: "Kernel busy", value: (r) => r.busy_ns, kind: "us", title: "Time with at least one kernel running (µs); the idle-time section's Busy also counts copies and fills" },
          { id: "util", header: "Utilization", value: (r) => r.utilization_pct, kind: "pct", title: "Kernel busy time over the steps' window" },
          { id: "sm", header: "Est. SM efficiency", value: (r) => r.sm_efficiency_pct, kind: "pct" },
          { id: "occ", header: "Est. achieved occupancy", value: (r) => r.occupancy_pct, kind: "pct" },
        ];
        if (d.matrix_unit) devCols.push({ id: "tc", header: `Kernel time using ${d.matrix_unit.toLowerCase()}`, value: (r) => r.tensor_core_pct, kind: "pct" });
        const stepCols: Col<Step>[] = [
          { id: "step", header: "Step", value: (r) => r.step, kind: "count" },
          { id: "name", header: "Name", value: (r) => r.name },
          { id: "start", header: "Start", value: (r) => r.start_ns, kind: "us", title: "From the trace's first event (µs)" },
          // one step duration everywhere (this table, the outliers, the critical path, the
          // Distributed view): from the step's start to the end of its last device work;
          // the ProfilerStep#N event on the CPU is the other column, named as such
          { id: "dur", header: "Step time", value: (r) => r.dur_ns, kind: "us", title: STEP_TIME_TITLE },
          { id: "host", header: "ProfilerStep on the CPU", value: (r) => (r.host_end_ns != null && r.host_start_ns != null ? r.host_end_ns - r.host_start_ns : null), kind: "us", title: "The ProfilerStep#N event's own duration on the CPU: what the Trace view shows when you click it" },
          { id: "dev", header: "Device events", value: (r) => r.device_events ?? null, kind: "count" },
        ];
        const s = d.summary;
        return (
          <div className="view">
            <Notes notes={d.notes} />
            <div className="stats">
              <Stat label="Average step time" value={<>{fmtDuration(s.step_time_avg_ns, 4)}<Caveat sel={sel} figure="step_time" /></>} hint={s.whole_trace_step ? "No ProfilerStep in the trace: the whole trace counts as one step" : undefined} />
              <Stat label={s.whole_trace_step ? "Steps (whole trace)" : "Steps"} value={String(s.num_steps)} hint={s.dropped_steps ? `${s.dropped_steps} incomplete step(s) left out` : undefined} />
              {d.devices.map((dev) => (
                <Stat key={dev.device} label={`${dev.word ?? dw} ${dev.device} utilization`} value={fmtPct(dev.utilization_pct)} />
              ))}
              {d.diagnosis && d.diagnosis.bound_by !== "none" && (
                <Stat label="Bound by" value={d.diagnosis.label} hint="What the step waits on most (the diagnosis below says why)" />
              )}
              {d.diagnosis?.figures.largest && (
                <Stat label={`Largest ${d.diagnosis.bound_by === "host" ? "host " : ""}cost, per step`}
                  value={`${d.diagnosis.figures.largest.label} ${fmtDuration(d.diagnosis.figures.largest.ns_per_step)}`}
                  hint="Of the average step (each ns counted once, by priority)" />
              )}
            </div>
            {d.diagnosis && <DiagnosisLine d={d.diagnosis} sel={sel} />}
            <Section title="Recommendations">
              <RecommendationList recs={d.recommendations} />
            </Section>
            <Section title="Step time breakdown, per step">
              <BreakdownCharts data={d} dark={dark} />
            </Section>
            <Section title="Step time" actions={<Caveat sel={sel} figure="step_time" />}>
              <StepTimeSection sel={sel} dark={dark} labels={d.breakdown.labels} />
            </Section>
            <Section title={`${dw} idle time`} actions={<Caveat sel={sel} figure="idle" />}>
              <IdleTimeSection sel={sel} dark={dark} deviceWord={dw} />
            </Section>
            <Section title="Critical path">
              <CriticalPathSection sel={sel} dark={dark} />
            </Section>
            <AnnotationsSection sel={sel} deviceWord={dw} />
            <Section title="Configuration">
              <KeyValues
                items={[
                  ...d.environments.map((e): [string, string] => [e.title, e.value]),
                  ...(d.origin_ns ? [["Trace start", fmtWallTime(d.wall_origin_ns ?? d.origin_ns, 0)] as [string, string]] : []),
                  ...(s.steps_span_ns ? [["Steps span", fmtDuration(s.steps_span_ns)] as [string, string]] : []),
                ]}
              />
            </Section>
            <Section title={`${dw} summary`}>
              {d.devices.length ? (
                <DataTable rows={d.devices} cols={devCols} exportName={[sel.run, "devices"]} pageSize={50} />
              ) : (
                <Empty title={`No ${d.device_kinds?.length ? d.device_word : "device"} activity`}>
                  This trace has no device events — was ProfilerActivity.CUDA (or your device's activity) enabled?
                </Empty>
              )}
            </Section>
            <Section title="Steps">
              <DataTable
                rows={d.steps}
                cols={stepCols}
                exportName={[sel.run, "steps"]}
                pageSize={50}
                onRowClick={(r) => setState({ view: "Trace", t0: String(r.start_ns), t1: String(r.end_ns), ev: undefined })}
                filterPlaceholder="Filter steps…"
              />
              <div className="muted small-note">Click a step to open it in the Trace view.</div>
            </Section>
          </div>
        );
      }}
    </Loaded>
  );
}
