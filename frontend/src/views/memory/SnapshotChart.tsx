// The snapshot's "Active memory over time" (memory_viz's main plot): the allocated (and
// reserved) bytes of one device from the allocator's history, each allocation of the window
// a band stacked as memory_viz stacks them (layoutBands; hover: its size and stack; click:
// select it), the peak marked; zoom with the
// wheel or the slider, pan by dragging. The window zoomed to is reported (onWindow, after
// the drag rests) so the section asks the server for that window's allocations.

import { useEffect, useMemo, useRef } from "react";
import { Chart, TOOLTIP_BASE } from "../../components/Chart";
import { escapeHtml, nameHtml, tooltipLine } from "../../util/escape";
import { fmtBytes, fmtDuration } from "../../util/format";
import { extentOf, niceAxis, valueAxis } from "../../util/ticks";
import { nameColor } from "../../timeline/colors";
import { bandOutline, layoutBands, topFrame, type Band, type SnapAllocation, type SnapshotTimelineReply } from "./snapshotData";

interface Props {
  d: SnapshotTimelineReply;
  t0Us: number;           // the snapshot's first time: x is ns from it
  endUs: number;          // its last time: a band still live runs to it
  dark: boolean;
  onSelect: (a: SnapAllocation) => void;
  onWindow: (w: [number, number] | null) => void; // µs, null: the whole history
  win: [number, number] | null;  // the window zoomed to (µs), kept across the refetch it causes
}

function bandTooltip(b: Band, d: SnapshotTimelineReply, fmtX: (v: number) => string): string {
  const a = b.alloc;
  const frames = d.stacks[String(a.stack)] ?? [];
  const lines = [
    tooltipLine("#888", "Size", fmtBytes(a.size)),
    tooltipLine("#888", "Allocated at", fmtX(b.x0)),
    tooltipLine("#888", "Freed at", a.end_us === null ? "still live" : fmtX(b.x1)),
    tooltipLine("#888", "Stream", a.stream ?? "–"),
    tooltipLine("#888", "Address", a.addr ?? "–"),
  ];
  const stack = frames.slice(0, 8).map((f) => nameHtml(f.filename && f.filename !== "none" ? `${f.name} — ${f.filename}:${f.line}` : f.name));
  return `<div class="tt-title">${escapeHtml(fmtBytes(a.size))} allocation</div>${lines.join("<br>")}` +
    (stack.length ? `<div class="tt-wrap">${stack.join("<br>")}${frames.length > 8 ? "<br>…" : ""}</div>` : "");
}

export function SnapshotChart({ d, t0Us, endUs, dark, onSelect, onWindow, win }: Props) {
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => { if (timer.current) clearTimeout(timer.current); }, []);
  const entries = d.time_axis === "entry"; // no times in the history: x is the entry's index
  const scale = entries ? 1 : 1000;
  const fmtX = (v: number) => (entries ? `entry ${Math.round(v).toLocaleString("en-US")}` : fmtDuration(v));
  const bands = useMemo(() => layoutBands(d.allocations, t0Us, endUs, scale), [d, t0Us, endUs, scale]);
  const extent: [number, number] = [0, Math.max(1, (endUs - t0Us) * scale)];
  const option = useMemo(() => {
    const xs = d.points.map((p) => [(p.time_us - t0Us) * scale, p.allocated_bytes]);
    const reserved = d.points.some((p) => p.reserved_bytes !== null);
    const shown: [number, number] = win ? [(win[0] - t0Us) * scale, (win[1] - t0Us) * scale] : extent;
    const pct = (v: number) => Math.min(100, Math.max(0, (100 * v) / extent[1]));
    const ax = niceAxis(shown[0], shown[1], entries ? "count" : "duration", { exact: true, count: 6 });
    const peak = d.peak && d.peak.time_us !== null && d.peak.allocated_bytes !== null ? d.peak : null;
    const top = Math.max(...bands.map((b) => b.y1), 0);
    return {
      animation: false,
      tooltip: { ...TOOLTIP_BASE, trigger: "item", formatter: (p: any) => (p.seriesName === "Allocations" ? bandTooltip(bands[p.dataIndex], d, fmtX) : `<div class="tt-title">${escapeHtml(fmtX(Number(p.value?.[0])))}</div>${tooltipLine(String(p.color), p.seriesName, fmtBytes(Number(p.value?.[1])))}`) },
      legend: { top: 0 },
      grid: { left: 80, right: 30, top: 36, bottom: 70 },
      xAxis: { type: "value", min: extent[0], max: extent[1], axisTick: { customValues: ax.ticks }, axisLabel: { hideOverlap: true, customValues: ax.ticks, formatter: ax.format } },
      yAxis: valueAxis(...extentOf([...d.points.flatMap((p) => [p.allocated_bytes, p.reserved_bytes]), top]), "bytes"),
      dataZoom: [
        { type: "slider", xAxisIndex: 0, filterMode: "none", bottom: 12, start: pct(shown[0]), end: pct(shown[1]), labelFormatter: fmtX },
        { type: "inside", xAxisIndex: 0, filterMode: "none" },
      ],
      series: [
        {
          name: "Allocations",
          type: "custom",
          // memory_viz's stacked bands: a polygon whose bottom steps down as allocations under it are freed
          renderItem: (params: any, api: any) => {
            const b = bands[params.dataIndex];
            const points = bandOutline(b).map((p) => api.coord(p));
            return { type: "polygon", shape: { points }, style: { fill: api.visual("color"), stroke: dark ? "#222" : "#fff", lineWidth: 0.3 } };
          },
          encode: { x: [0, 1], y: [2, 3] },
          data: bands.map((b) => ({ value: [b.x0, b.x1, b.y0, b.y1], itemStyle: { color: nameColor(topFrame(d.stacks[String(b.alloc.stack)]) || String(b.alloc.stack), dark) } })),
        },
        {
          name: "Allocated",
          type: "line",
          step: "end",
          showSymbol: false,
          lineStyle: { width: 1.5 },
          data: xs,
          markPoint: peak ? { symbolSize: 36, label: { formatter: "peak" }, data: [{ coord: [(Number(peak.time_us) - t0Us) * scale, peak.allocated_bytes], value: "peak" }] } : undefined,
        },
        ...(reserved ? [{ name: "Reserved", type: "line", step: "end", showSymbol: false, lineStyle: { width: 1, type: "dashed" }, data: d.points.map((p) => [(p.time_us - t0Us) * scale, p.reserved_bytes]) }] : []),
      ],
    };
  }, [d, bands, t0Us, endUs, dark, win?.[0], win?.[1], scale]); // eslint-disable-line react-hooks/exhaustive-deps

  const events = useMemo(() => ({
    click: (p: any) => { if (p.seriesName === "Allocations" && bands[p.dataIndex]) onSelect(bands[p.dataIndex].alloc); },
    datazoom: (p: any) => {
      const b = p.batch?.[0] ?? p;
      const s = typeof b.start === "number" ? b.start : 0;
      const e = typeof b.end === "number" ? b.end : 100;
      const span = endUs - t0Us;
      if (timer.current) clearTimeout(timer.current);
      const next: [number, number] | null = s <= 0.01 && e >= 99.99 ? null : [Math.floor(t0Us + (s / 100) * span), Math.ceil(t0Us + (e / 100) * span)];
      timer.current = setTimeout(() => onWindow(next), 300);
    },
  }), [bands, t0Us, endUs, onSelect, onWindow]);

  if (!d.points.length) return <div className="muted">No allocator history for this device (record it with torch.cuda.memory._record_memory_history()).</div>;
  return <Chart option={option} dark={dark} height={360} events={events} ariaLabel="Snapshot: active memory over time" />;
}
