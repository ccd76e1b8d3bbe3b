// The Operator view's "Roofline" section (roofline): every operator (or kernel) with a FLOP
// count as a point of a log-log chart, x its arithmetic intensity (FLOP per byte), y the
// TFLOP/s it achieved, sized by its device time, colored by its dtype, a diamond when
// compute-bound; under the points the device's roofs, one per dtype present,
// y = min(peak TF/s, peak TB/s × x): the memory slope up to the ridge point, then the flat
// compute roof. The same rows in a table; the device and where its peaks come from; the
// notes (no roof for this device, convolutions without a count, ...).

import { useMemo, useState } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { RooflinePeaks, RooflineReply, RooflineRow } from "../../api/types/why";
import { Chart, TOOLTIP_BASE } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes, Tabs } from "../../components/common";
import { escapeHtml, nameHtml, tooltipLine } from "../../util/escape";
import { fmtBytes, fmtCount, fmtDuration, fmtPct } from "../../util/format";

export type RoofTable = "operators" | "kernels";
export const ROOF_TABLES: { value: RoofTable; label: string }[] = [
  { value: "operators", label: "Operators" },
  { value: "kernels", label: "Kernels" },
];

export const DTYPE_COLORS: Record<string, string> = {
  fp64: "#9a60b4",
  fp32: "#5470c6",
  tf32: "#73c0de",
  fp16: "#fc8452",
  bf16: "#ee6666",
  fp8: "#3ba272",
  int8: "#ea7ccc",
};
export const UNKNOWN_DTYPE = "no dtype";
const UNKNOWN_COLOR = "#888888";
const MEMORY_COLOR = "#5a5a5a";

/** The legend's name of a row's dtype. */
export function dtypeName(d: string | null | undefined): string {
  return d ? d : UNKNOWN_DTYPE;
}

export function dtypeColor(d: string | null | undefined): string {
  return (d && DTYPE_COLORS[d]) || UNKNOWN_COLOR;
}

/** 3 significant digits, separators, no exponent; "–" when unknown. */
export function fmtSig(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (v === 0) return "0";
  return v.toLocaleString("en-US", { maximumSignificantDigits: 3 });
}

const FLOP_UNITS = ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"];

/** "1.84 GFLOP" */
export function fmtFlops(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  let u = 0;
  let x = Math.abs(v);
  while (x >= 1000 && u < FLOP_UNITS.length - 1) {
    x /= 1000;
    u++;
  }
  return `${v < 0 ? "-" : ""}${fmtSig(x)} ${FLOP_UNITS[u]}`;
}

/** A row can be drawn on log axes: a positive, finite intensity and rate. */
export function plottable(r: Pick<RooflineRow, "intensity" | "tflops">): boolean {
  return r.intensity !== null && r.tflops !== null && Number.isFinite(r.intensity) && Number.isFinite(r.tflops) && r.intensity > 0 && r.tflops > 0;
}

/** A point's diameter in px by its device time: the area grows with the time. */
export function pointSize(ns: number, maxNs: number): number {
  if (!(maxNs > 0) || !(ns > 0)) return 6;
  return Math.round(6 + 24 * Math.sqrt(Math.min(1, ns / maxNs)));
}

/** The roof above each dtype present: its peak TF/s, the memory's TB/s and the ridge point
 * (FLOP/byte where the two meet). Dtypes with the same peak share one roof. */
export interface Roof {
  dtypes: string[];
  tflops: number;
  tbps: number;
  ridge: number;
  name: string;
}

export function memoryWord(deviceName: string | null | undefined): string {
  return /(?<![A-Za-z0-9])(L4|L40S?|A10G?|RTX|GeForce|Quadro|T4)(?![A-Za-z0-9])/i.test(deviceName ?? "") ? "DRAM" : "HBM";
}

/** "HBM 3.35 TB/s" */
export function memoryLabel(tbps: number, deviceName?: string | null): string {
  return `${memoryWord(deviceName)} ${fmtSig(tbps)} TB/s`;
}

export function roofsFor(rows: Pick<RooflineRow, "dtype">[], peaks: RooflinePeaks | null | undefined): Roof[] {
  const tbps = peaks?.tbps;
  if (!peaks || tbps === null || tbps === undefined || !(tbps > 0)) return [];
  const present = [...new Set(rows.map((r) => r.dtype).filter((d): d is string => !!d))];
  const byPeak = new Map<number, string[]>();
  for (const d of present) {
    const p = peaks.tflops?.[d];
    if (p === undefined || p === null || !(p > 0)) continue;
    byPeak.set(p, [...(byPeak.get(p) ?? []), d]);
  }
  return [...byPeak.entries()]
    .sort((a, b) => b[0] - a[0])
    .map(([p, ds]) => ({ dtypes: ds, tflops: p, tbps, ridge: p / tbps, name: `${ds.join("/")} ${fmtSig(p)} TF/s` }));
}

/** The roof's height at intensity x: min(peak TF/s, TB/s × x) (TB/s × FLOP/byte = TFLOP/s). */
export function roofY(tflops: number, tbps: number, x: number): number {
  return Math.min(tflops, tbps * x);
}

/** The powers of ten around positive values: [10^floor(log10 min), 10^ceil(log10 max)], a decade at least. */
export function logRange(values: number[]): [number, number] {
  const v = values.filter((x) => Number.isFinite(x) && x > 0);
  if (!v.length) return [0.1, 10];
  let lo = Math.floor(Math.log10(Math.min(...v)));
  let hi = Math.ceil(Math.log10(Math.max(...v)));
  if (hi <= lo) hi = lo + 1;
  return [10 ** lo, 10 ** hi];
}

/** The roof's corners inside the plot [xmin, xmax] × [ymin, ...): from where the memory
 * slope enters the plot, the ridge point, the right edge. */
export function roofLine(tflops: number, tbps: number, xmin: number, xmax: number, ymin: number): [number, number][] {
  const ridge = tflops / tbps;
  const x0 = Math.max(xmin, ymin / tbps);
  if (ridge <= x0) return [[x0, roofY(tflops, tbps, x0)], [xmax, tflops]];
  if (ridge >= xmax) return [[x0, tbps * x0], [xmax, tbps * xmax]];
  return [[x0, tbps * x0], [ridge, tflops], [xmax, tflops]];
}

/** A point's tooltip: the row's name (escaped) and its figures. */
export function pointTooltip(r: RooflineRow, what = "Operator"): string {
  const c = dtypeColor(r.dtype);
  const lines = [
    tooltipLine(c, "dtype", r.dtype ?? "–"),
    tooltipLine(c, "Calls", fmtCount(r.calls)),
    tooltipLine(c, "TFLOP/s", fmtSig(r.tflops)),
    tooltipLine(c, "TB/s", fmtSig(r.tbps)),
    tooltipLine(c, "Intensity", `${fmtSig(r.intensity)} FLOP/byte`),
    tooltipLine(c, "% of compute peak", r.peak_tflops === null ? "– (no roof)" : `${fmtPct(r.compute_pct)} of ${fmtSig(r.peak_tflops)} TF/s`),
    tooltipLine(c, "% of memory peak", r.peak_tbps === null ? "– (no roof)" : `${fmtPct(r.memory_pct)} of ${fmtSig(r.peak_tbps)} TB/s`),
    tooltipLine(c, "Bound", r.bound ?? "–"),
    tooltipLine(c, "FLOPs", `${fmtFlops(r.flops)} (${r.source})`),
    tooltipLine(c, "Bytes", fmtBytes(r.bytes)),
    tooltipLine(c, "Device time", fmtDuration(r.device_ns, 4)),
  ];
  return `<div class="tt-title tt-wrap">${escapeHtml(what)}: ${nameHtml(r.name)}</div>${lines.join("<br>")}`;
}

/** The log-log chart: one scatter series per dtype (value [intensity, tflops, row index]),
 * one line per roof. */
export function rooflineOption(rows: RooflineRow[], peaks: RooflinePeaks | null | undefined, deviceName?: string | null, what = "Operator") {
  const pts = rows.map((r, i) => [r, i] as const).filter(([r]) => plottable(r));
  const roofs = roofsFor(pts.map(([r]) => r), peaks);
  const tbps = roofs.length ? roofs[0].tbps : null;
  const [xmin, xmax] = logRange([...pts.map(([r]) => r.intensity!), ...roofs.map((f) => f.ridge)]);
  const ys = pts.map(([r]) => r.tflops!);
  const [ymin] = logRange(ys.length ? ys : roofs.map((f) => f.tflops));
  const [, ymax] = logRange([...ys, ...roofs.map((f) => f.tflops * 1.6)]);
  const maxNs = Math.max(0, ...pts.map(([r]) => r.device_ns));
  const dtypes = [...new Set(pts.map(([r]) => dtypeName(r.dtype)))];
  const pointSeries = dtypes.map((d) => ({
    name: d,
    type: "scatter",
    itemStyle: { color: dtypeColor(d === UNKNOWN_DTYPE ? null : d), opacity: 0.75, borderColor: "#fff", borderWidth: 0.5 },
    emphasis: { focus: "none", itemStyle: { opacity: 1, borderColor: "#000", borderWidth: 1 } },
    z: 3,
    data: pts
      .filter(([r]) => dtypeName(r.dtype) === d)
      .map(([r, i]) => ({
        name: r.name,
        value: [r.intensity!, r.tflops!, i],
        symbol: r.bound === "compute" ? "diamond" : "circle",
        symbolSize: pointSize(r.device_ns, maxNs),
      })),
  }));
  const roofSeries = roofs.map((f, k) => {
    const corners = roofLine(f.tflops, f.tbps, xmin, xmax, ymin);
    const data: any[] = corners.map((c) => ({ value: c }));
    // the compute roof's label over its right end
    data[data.length - 1] = { value: corners[corners.length - 1], label: { show: true, position: "top", align: "right", formatter: f.name, color: dtypeColor(f.dtypes[0]) } };
    if (k === 0 && corners.length > 1 && corners[0][1] < f.tflops) {
      // the memory slope's label halfway up it (geometric middle: a log axis)
      const end = Math.min(f.ridge, xmax);
      const xm = Math.sqrt(corners[0][0] * end);
      data.splice(1, 0, { value: [xm, roofY(f.tflops, f.tbps, xm)], label: { show: true, position: "left", formatter: memoryLabel(f.tbps, deviceName), color: MEMORY_COLOR } });
    }
    return {
      name: f.name,
      type: "line",
      silent: true,
      symbol: "circle",
      symbolSize: 0,
      showSymbol: true,
      z: 2,
      lineStyle: { color: dtypeColor(f.dtypes[0]), width: 2, type: "solid" },
      itemStyle: { color: dtypeColor(f.dtypes[0]) },
      data,
      roof: { dtypes: f.dtypes, tflops: f.tflops, tbps: f.tbps, ridge: f.ridge },
    };
  });
  // peaks for a memory but for no dtype present: the slope alone
  const slopeOnly =
    !roofs.length && peaks?.tbps && peaks.tbps > 0 && pts.length
      ? [{
          name: memoryLabel(peaks.tbps, deviceName),
          type: "line",
          silent: true,
          showSymbol: false,
          z: 2,
          lineStyle: { color: MEMORY_COLOR, width: 2, type: "dashed" },
          itemStyle: { color: MEMORY_COLOR },
          data: [[Math.max(xmin, ymin / peaks.tbps), Math.max(ymin, peaks.tbps * xmin)], [Math.min(xmax, ymax / peaks.tbps), Math.min(ymax, peaks.tbps * xmax)]],
          roof: { dtypes: [], tflops: null, tbps: peaks.tbps, ridge: null },
        }]
      : [];
  const logAxis = (name: string, min: number, max: number, unit: string) => ({
    type: "log",
    logBase: 10,
    min,
    max,
    name,
    nameLocation: "middle",
    nameGap: 30,
    splitLine: { show: true, lineStyle: { opacity: 0.5 } },
    minorTick: { show: true },
    minorSplitLine: { show: true, lineStyle: { opacity: 0.15 } },
    axisLabel: { formatter: (v: number) => fmtSig(v) + unit, hideOverlap: true },
  });
  return {
    tooltip: {
      ...TOOLTIP_BASE,
      trigger: "item",
      formatter: (p: any) => {
        const i = Array.isArray(p?.value) ? p.value[2] : undefined;
        return p?.seriesType === "scatter" && typeof i === "number" && rows[i] ? pointTooltip(rows[i], what) : "";
      },
    },
    legend: { top: 0, type: "scroll" },
    grid: { left: 70, right: 30, top: 36, bottom: 48 },
    xAxis: logAxis("Arithmetic intensity (FLOP/byte)", xmin, xmax, ""),
    yAxis: { ...logAxis("Achieved TFLOP/s", ymin, ymax, ""), nameGap: 48 },
    series: [...roofSeries, ...slopeOnly, ...pointSeries],
    tbRoofline: { tbps, roofs, points: pts.length, xmin, xmax, ymin, ymax },
  };
}

export function rooflineCols(what: string): Col<RooflineRow>[] {
  return [
    { id: "name", header: what, value: (r) => r.name, width: 220 },
    { id: "dtype", header: "Dtype", value: (r) => r.dtype ?? "", nowrap: true, title: "Of the operator's first floating-point input" },
    { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
    { id: "flops", header: "FLOPs", value: (r) => r.flops, kind: "num", render: (r) => fmtFlops(r.flops) },
    { id: "bytes", header: "Bytes", value: (r) => r.bytes, kind: "bytes", title: "Tensor inputs + output" },
    { id: "device", header: "Device time", value: (r) => r.device_ns, kind: "us" },
    { id: "tflops", header: "TFLOP/s", value: (r) => r.tflops, kind: "num", render: (r) => fmtSig(r.tflops), title: "Achieved: FLOPs over device time" },
    { id: "tbps", header: "TB/s", value: (r) => r.tbps, kind: "num", render: (r) => fmtSig(r.tbps), title: "Achieved: bytes over device time" },
    { id: "intensity", header: "Intensity", value: (r) => r.intensity, kind: "num", render: (r) => fmtSig(r.intensity), title: "Arithmetic intensity: FLOP per byte" },
    { id: "peak_tflops", header: "Peak TFLOP/s", value: (r) => r.peak_tflops, kind: "num", render: (r) => fmtSig(r.peak_tflops), title: "The device's peak for this dtype" },
    { id: "peak_tbps", header: "Peak TB/s", value: (r) => r.peak_tbps, kind: "num", render: (r) => fmtSig(r.peak_tbps) },
    { id: "compute_pct", header: "Of compute peak", value: (r) => r.compute_pct, kind: "pct" },
    { id: "memory_pct", header: "Of memory peak", value: (r) => r.memory_pct, kind: "pct" },
    { id: "bound", header: "Bound", value: (r) => r.bound ?? "", nowrap: true, title: "compute: intensity above the ridge point (peak FLOP/s over peak bytes/s); memory: below" },
    { id: "source", header: "FLOPs from", value: (r) => r.source, nowrap: true, title: "trace flops: the flops arg of a with_flops=True profile; shapes: from the recorded input shapes" },
  ];
}

/** "V100: 0.9 TB/s · fp32 15.7, fp16 125 TF/s" */
export function peaksText(peaks: RooflinePeaks | null | undefined): string {
  if (!peaks) return "";
  const tf = Object.entries(peaks.tflops ?? {}).map(([d, v]) => `${d} ${fmtSig(v)}`);
  return [peaks.tbps ? `${fmtSig(peaks.tbps)} TB/s` : "", tf.length ? `${tf.join(", ")} TF/s` : ""].filter(Boolean).join(" · ");
}

export function RooflineSection({ sel, dark }: Pick<ViewProps, "sel" | "dark">) {
  const state = useApi<RooflineReply>("roofline", sel);
  const [tab, setTab] = useState<RoofTable>("operators");
  const what = tab === "operators" ? "Operator" : "Kernel";
  const cols = useMemo(() => rooflineCols(what), [what]);
  const option = useMemo(
    () => (state.data ? rooflineOption(state.data[tab], state.data.device.peaks, state.data.device.name, what) : null),
    [state.data, tab, what],
  );
  const name = (w: string) => [sel.run, sel.worker, "span" + (sel.span ?? ""), w];
  return (
    <Loaded state={state}>
      {(d) => {
        const notes = d.notes.filter((n) => n !== d.device.peaks_from);
        if (!d.operators.length && !d.kernels.length) {
          return (
            <Empty title="No FLOP counts">
              {d.notes.length ? <Notes notes={d.notes} /> : "No operator of this trace has a FLOP count: profile with with_flops=True, or record_shapes=True."}
            </Empty>
          );
        }
        const rows = d[tab];
        const total = tab === "operators" ? d.operators_total : d.kernels_total;
        const points = option?.tbRoofline.points ?? 0;
        return (
          <div className="why-roofline" data-table={tab} data-rows={rows.length} data-total={total} data-points={points}>
            <div className="roofline-device muted" data-roof={d.device.peaks ? "yes" : "no"}>
              <b>{d.device.name ?? "No device named"}</b> · peaks: {d.device.peaks_from}
              {d.device.peaks ? <span className="roofline-peaks"> ({peaksText(d.device.peaks)})</span> : null}
            </div>
            <Notes notes={notes} />
            <div className="controls" style={{ marginTop: 6 }}>
              <Tabs label="Operators or kernels" value={tab} onChange={setTab} options={ROOF_TABLES} />
            </div>
            {rows.length === 0 ? (
              <Empty title={`No ${tab} with FLOPs`} />
            ) : (
              <>
                {option && points > 0 ? (
                  <>
                    <Chart option={option} dark={dark} height={420} ariaLabel="Roofline" />
                    <div className="muted small-note">
                      One point per {what.toLowerCase()} (size: device time; ◆ compute-bound, ● memory-bound). Roofs: min(peak TF/s of the dtype, memory TB/s × intensity).
                      {points < rows.length ? ` ${fmtCount(rows.length - points)} not drawn (no device time or no bytes): in the table only.` : ""}
                    </div>
                  </>
                ) : (
                  <div className="muted">No {what.toLowerCase()} with FLOPs ran on the device: nothing to draw.</div>
                )}
                <div className="roofline-table">
                  <DataTable
                    rows={rows}
                    cols={cols}
                    exportName={name(`roofline-${tab}`)}
                    pageSize={25}
                    initialSort={{ id: "flops", desc: true }}
                    caption={`${fmtCount(rows.length)} of ${fmtCount(total)} ${tab}${rows.length < total ? " (most FLOPs first)" : ""}`}
                    filterPlaceholder={`Filter roofline ${tab}…`}
                  />
                </div>
              </>
            )}
          </div>
        );
      }}
    </Loaded>
  );
}
