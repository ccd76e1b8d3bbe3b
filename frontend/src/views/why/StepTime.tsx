// The Overview's "Step time" section (steps/outliers): median, mean, p90 and max side by
// side, each step's duration as a bar (outliers in red, the median as a line), and the
// outlier steps with the breakdown category that grew most against the median step's.
// The factor (× the median above which a step is an outlier) is a control: 1.25 / 1.5 /
// 2 / 3 ×, or any other typed in.

import { useMemo, useState } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { OutlierStep, StepOutlierRow, StepOutliersReply } from "../../api/types/why";
import { Chart, rowTooltip } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes, Select, Stat } from "../../components/common";
import { setState } from "../../state/store";
import { escapeHtml, nameHtml, tooltipLine } from "../../util/escape";
import { extentOf, valueAxis } from "../../util/ticks";
import { fmtDeltaDuration, fmtDuration, fmtNumber } from "../../util/format";
import { STEP_TIME_TITLE } from "../../util/labels";

export const FACTORS = [
  { value: "125", label: "1.25 ×" },
  { value: "150", label: "1.5 ×" },
  { value: "200", label: "2 ×" },
  { value: "300", label: "3 ×" },
  { value: "custom", label: "Other…" },
];
export const DEFAULT_FACTOR_PCT = 150;
const OUTLIER_COLOR = "#c5221f";
const STEP_COLOR = "#5470c6";

/** A typed factor (× the median) as the route's factor_pct (101..10000), or null when out of range. */
export function factorPct(text: string): number | null {
  const x = Number(text.trim().replace(/×$/, "").trim());
  if (!Number.isFinite(x)) return null;
  const pct = Math.round(x * 100);
  return pct >= 101 && pct <= 10000 ? pct : null;
}

/** "1.5 ×" from a factor_pct. */
export function factorLabel(pct: number): string {
  return `${fmtNumber(pct / 100, 2)} ×`;
}

/** Each step's duration as a bar, outliers red, the median (and mean) as lines. */
export function stepBarsOption(d: StepOutliersReply) {
  const steps = d.steps;
  const st = d.stats;
  const lines = st
    ? [
        { name: "Median", yAxis: st.median_ns, lineStyle: { color: "#3ba272", type: "solid", width: 2 }, label: { formatter: `median ${fmtDuration(st.median_ns)}`, position: "insideEndTop" } },
        { name: "Mean", yAxis: st.mean_ns, lineStyle: { color: "#fac858", type: "dashed" }, label: { formatter: `mean ${fmtDuration(st.mean_ns)}`, position: "insideStartTop" } },
      ]
    : [];
  return {
    tooltip: rowTooltip(steps, (s: StepOutlierRow) => {
      const head = `<div class="tt-title">${nameHtml(s.name)}</div>`;
      const body = [
        tooltipLine(s.outlier ? OUTLIER_COLOR : STEP_COLOR, "Duration", fmtDuration(s.dur_ns, 4)),
        tooltipLine("#888", "× median", s.ratio === null ? "–" : fmtNumber(s.ratio, 3)),
      ].join("<br>");
      return head + body + (s.outlier ? `<div class="tt-warn">⚠ outlier: above ${escapeHtml(factorLabel(Math.round((st?.factor ?? 1.5) * 100)))} the median</div>` : "");
    }),
    grid: { left: 70, right: 20, top: 24, bottom: 40 },
    xAxis: { type: "category", data: steps.map((s) => String(s.step)), name: "Step", nameLocation: "middle", nameGap: 26 },
    yAxis: valueAxis(...extentOf([...steps.map((s) => s.dur_ns), st?.median_ns, st?.mean_ns]), "duration"),
    series: [
      {
        name: "Step duration",
        type: "bar",
        barMaxWidth: 40,
        data: steps.map((s) => ({ value: s.dur_ns, itemStyle: { color: s.outlier ? OUTLIER_COLOR : STEP_COLOR } })),
        markLine: lines.length ? { symbol: "none", silent: true, animation: false, data: lines } : undefined,
      },
    ],
  };
}

/** The categories of the breakdown an outlier row carries (`<cat>_ns` with a `<cat>_delta_ns`). */
export function outlierCategories(r: OutlierStep): string[] {
  return Object.keys(r)
    .filter((k) => k.endsWith("_delta_ns"))
    .map((k) => k.slice(0, -"_delta_ns".length))
    .filter((c) => typeof r[`${c}_ns`] === "number");
}

export function causeDelta(r: OutlierStep): number | null {
  const v = r.cause ? r[`${r.cause}_delta_ns`] : null;
  return typeof v === "number" ? v : null;
}

export function outlierCols(): Col<OutlierStep>[] {
  return [
    { id: "step", header: "Step", value: (r) => r.step, kind: "count" },
    { id: "name", header: "Name", value: (r) => r.name, nowrap: true },
    { id: "dur", header: "Step time", value: (r) => r.dur_ns, kind: "us", title: STEP_TIME_TITLE },
    { id: "ratio", header: "× median", value: (r) => r.ratio, kind: "num", title: "The step's duration over the median step's" },
    { id: "excess", header: "Excess", value: (r) => r.excess_ns, kind: "us", title: "Duration above the median step's" },
    { id: "cause", header: "Cause", value: (r) => r.cause_label ?? r.cause ?? "", title: "The step-time breakdown category that grew most against the median step" },
    { id: "cause_delta", header: "Cause Δ", value: (r) => causeDelta(r), kind: "delta_us", title: "That category's time in this step less the median step's" },
  ];
}

function OutlierBreakdown({ r, labels, median }: { r: OutlierStep; labels: Record<string, string>; median: Record<string, number> }) {
  const cats = outlierCategories(r);
  return (
    <table className="data compact outlier-breakdown" style={{ width: "auto", minWidth: 480 }}>
      <thead>
        <tr>
          <th className="t-left">Category</th>
          <th className="t-right">This step</th>
          <th className="t-right">Median step</th>
          <th className="t-right">Δ</th>
        </tr>
      </thead>
      <tbody>
        {cats.map((c) => {
          const delta = Number(r[`${c}_delta_ns`]);
          return (
            <tr key={c} className={c === r.cause ? "worse" : undefined}>
              <td className="t-left">{labels[c] ?? c}</td>
              <td className="t-right num">{fmtDuration(Number(r[`${c}_ns`]))}</td>
              <td className="t-right num">{fmtDuration(median[`${c}_ns`] ?? null)}</td>
              <td className="t-right num">{fmtDeltaDuration(delta)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function FactorControl({ pct, onChange }: { pct: number; onChange: (pct: number) => void }) {
  const preset = FACTORS.some((f) => f.value === String(pct));
  const [custom, setCustom] = useState(!preset);
  const [text, setText] = useState(String(pct / 100));
  const bad = custom && factorPct(text) === null;
  return (
    <div className="controls factor-control" style={{ marginBottom: 10 }}>
      <Select
        label="Outlier above"
        title="A step is an outlier when it takes more than this factor × the median step"
        value={custom ? "custom" : String(pct)}
        options={FACTORS}
        onChange={(v) => {
          if (v === "custom") {
            setCustom(true);
            setText(String(pct / 100));
          } else {
            setCustom(false);
            onChange(Number(v));
          }
        }}
      />
      {custom && (
        <label className="select">
          <span className="select-label">× the median</span>
          <input
            type="number"
            aria-label="Outlier factor"
            min={1.01}
            max={100}
            step={0.05}
            value={text}
            aria-invalid={bad}
            onChange={(e) => {
              setText(e.target.value);
              const p = factorPct(e.target.value);
              if (p !== null) onChange(p);
            }}
            style={{ width: 80 }}
          />
        </label>
      )}
      {bad && <span className="worse small-note">1.01 to 100</span>}
    </div>
  );
}

export function StepTimeSection({ sel, dark, labels }: Pick<ViewProps, "sel" | "dark"> & { labels: Record<string, string> }) {
  const [pct, setPct] = useState(DEFAULT_FACTOR_PCT);
  const state = useApi<StepOutliersReply>("steps/outliers", { ...sel, factor_pct: pct }, { keepStale: true });
  const option = useMemo(() => (state.data ? stepBarsOption(state.data) : null), [state.data]);
  const cols = useMemo(() => outlierCols(), []);
  return (
    <div className="why-steps" data-factor-pct={pct}>
      <FactorControl pct={pct} onChange={setPct} />
      <Loaded state={state}>
        {(d) => {
          const st = d.stats;
          if (!st || !d.steps.length) return <Empty title="No steps">{d.notes[0] ?? "The trace has no steps to compare."}</Empty>;
          return (
            <>
              <Notes notes={d.notes} />
              <div className="stats step-stats" data-median={st.median_ns} data-mean={st.mean_ns} data-p90={st.p90_ns} data-max={st.max_ns} data-steps={st.steps}>
                <Stat label="Median step" value={fmtDuration(st.median_ns, 4)} />
                <Stat label="Mean step" value={fmtDuration(st.mean_ns, 4)} hint="The average step: beside the median, it shows how much a few slow steps pull" />
                <Stat label="p90 step" value={fmtDuration(st.p90_ns, 4)} />
                <Stat label="Slowest step" value={fmtDuration(st.max_ns, 4)} />
                <Stat label="Fastest step" value={fmtDuration(st.min_ns, 4)} />
                <Stat label={`Outliers (above ${factorLabel(Math.round(st.factor * 100))} the median)`} value={String(d.outliers.length)} />
              </div>
              {option && <Chart option={option} dark={dark} height={260} ariaLabel="Step duration per step" />}
              {d.outliers.length ? (
                <DataTable
                  rows={d.outliers}
                  cols={cols}
                  exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "outlier-steps"]}
                  pageSize={50}
                  caption="Outlier steps, slowest first: expand one for its breakdown against the median step's"
                  canExpand={() => true}
                  expandLabel="Breakdown"
                  renderExpanded={(r) => <OutlierBreakdown r={r} labels={labels} median={d.median_step} />}
                  toolbar={
                    <button
                      type="button"
                      className="small"
                      title="Open the slowest outlier step in the Trace view"
                      onClick={() => {
                        const s = d.steps.find((x) => x.step === d.outliers[0].step);
                        if (s) setState({ view: "Trace", t0: String(s.start_ns), t1: String(s.start_ns + s.dur_ns), ev: undefined });
                      }}
                    >
                      Open slowest in Trace
                    </button>
                  }
                />
              ) : (
                <div className="muted no-outliers">No step takes more than {factorLabel(Math.round(st.factor * 100))} the median step.</div>
              )}
            </>
          );
        }}
      </Loaded>
    </div>
  );
}
