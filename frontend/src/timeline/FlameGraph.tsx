// An aggregated flame graph on a canvas (module tree): each node as wide as its time,
// children under their parent. Click a node to zoom into it, hover for its numbers.
// Names on the canvas show their bidi controls as markers (util/bidi: canvasLabel), in the
// tooltip they are isolated (components/Name).

import { useEffect, useMemo, useRef, useState } from "react";
import { Name } from "../components/Name";
import { canvasLabel } from "../util/bidi";
import { fmtDuration } from "../util/format";
import { nameColor, palette } from "./colors";
import { fitRange, hitTest, spanToPx, type Viewport } from "./coords";

export interface FlameNode {
  id: string | number;
  name: string;
  start_ns: number;
  end_ns: number;
  children: FlameNode[];
  detail?: string;
}

interface Item {
  track: number;
  depth: number;
  ts_ns: number;
  dur_ns: number;
  node: FlameNode;
}

const ROW = 20;

export function flatten(nodes: FlameNode[]): { items: Item[]; depth: number; start: number; end: number } {
  const items: Item[] = [];
  let maxDepth = 0;
  let start = Infinity;
  let end = -Infinity;
  const walk = (n: FlameNode, d: number) => {
    items.push({ track: 0, depth: d, ts_ns: n.start_ns, dur_ns: Math.max(0, n.end_ns - n.start_ns), node: n });
    maxDepth = Math.max(maxDepth, d);
    start = Math.min(start, n.start_ns);
    end = Math.max(end, n.end_ns);
    for (const c of n.children ?? []) walk(c, d + 1);
  };
  for (const n of nodes) walk(n, 0);
  if (!items.length) return { items, depth: 0, start: 0, end: 1 };
  return { items, depth: maxDepth + 1, start, end: Math.max(end, start + 1) };
}

export function FlameGraph({ nodes, dark }: { nodes: FlameNode[]; dark: boolean }) {
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(800);
  const flat = useMemo(() => flatten(nodes), [nodes]);
  const bounds = useMemo(() => ({ start: flat.start, end: flat.end }), [flat]);
  const [vp, setVp] = useState<Viewport>({ start: flat.start, end: flat.end, width: 800 });
  const [hover, setHover] = useState<{ x: number; y: number; item: Item } | null>(null);
  const height = Math.max(60, flat.depth * ROW + 4);
  const view = { ...vp, width };

  useEffect(() => setVp({ start: flat.start, end: flat.end, width }), [flat]); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => {
    if (!wrap.current) return;
    const ro = new ResizeObserver((e) => setWidth(Math.max(100, Math.floor(e[0].contentRect.width))));
    ro.observe(wrap.current);
    return () => ro.disconnect();
  }, []);

  useEffect(() => {
    const c = canvas.current;
    if (!c) return;
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.round(width * dpr);
    c.height = Math.round(height * dpr);
    c.style.width = `${width}px`;
    c.style.height = `${height}px`;
    const ctx = c.getContext("2d");
    if (!ctx) return;
    const pal = palette(dark);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = pal.bg;
    ctx.fillRect(0, 0, width, height);
    ctx.font = "11px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
    ctx.textBaseline = "middle";
    ctx.direction = "ltr";
    const charW = Math.max(5, ctx.measureText("abcdefghijklmnopqrstuvwxyz_:").width / 28);
    for (const it of flat.items) {
      const px = spanToPx(it.ts_ns, it.dur_ns, view, 0.5);
      if (!px) continue;
      const y = it.depth * ROW;
      ctx.fillStyle = nameColor(it.node.name, dark);
      ctx.fillRect(px.x, y + 1, Math.max(px.w - 1, 0.5), ROW - 2);
      if (px.w > 24) {
        const vx = Math.max(px.x, 0);
        const vw = Math.min(px.x + px.w, width) - vx;
        const n = Math.floor((vw - 6) / charW);
        if (n >= 2) {
          ctx.fillStyle = dark ? "#f2f2f2" : "#1a1a1a";
          ctx.fillText(canvasLabel(it.node.name, n), vx + 3, y + ROW / 2);
        }
      }
    }
  }, [flat, view.start, view.end, width, height, dark]); // eslint-disable-line react-hooks/exhaustive-deps

  const boxes = [{ id: 0, y: 0, height: flat.depth * ROW, rows: flat.depth }];
  const at = (e: React.MouseEvent) => {
    const r = canvas.current!.getBoundingClientRect();
    const x = e.clientX - r.left;
    const y = e.clientY - r.top;
    return { x, y, item: hitTest(flat.items, boxes, x, y, view, ROW, 0) };
  };

  if (!flat.items.length) return <div className="muted">No modules to draw.</div>;
  const zoomed = vp.start > flat.start || vp.end < flat.end;
  return (
    <div className="flame" ref={wrap}>
      <div className="controls">
        <button type="button" className="small" disabled={!zoomed} onClick={() => setVp({ start: flat.start, end: flat.end, width })}>
          Reset zoom
        </button>
        <span className="muted">Width is host time; click a module to zoom into it.</span>
      </div>
      <canvas
        ref={canvas}
        onMouseMove={(e) => {
          const h = at(e);
          setHover(h.item ? { x: h.x, y: h.y, item: h.item } : null);
        }}
        onMouseLeave={() => setHover(null)}
        onClick={(e) => {
          const h = at(e);
          if (h.item) setVp(fitRange(h.item.ts_ns, h.item.ts_ns + Math.max(h.item.dur_ns, 1), width, bounds, 0));
        }}
        style={{ cursor: hover ? "pointer" : "default" }}
        aria-label="Module flame graph"
      />
      {hover && (
        <div className="tl-tip" style={{ left: Math.min(hover.x + 12, width - 260), top: hover.y + 14 }}>
          <div className="tl-tip-name"><Name text={hover.item.node.name} /></div>
          <div className="muted">
            {fmtDuration(hover.item.dur_ns)}
            {hover.item.node.detail ? <> · <Name text={hover.item.node.detail} /></> : ""}
          </div>
        </div>
      )}
    </div>
  );
}
