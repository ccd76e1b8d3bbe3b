// The Memory view's "Snapshot" section (issue 20): the run's allocator snapshots
// (torch.cuda.memory._dump_snapshot pickles beside its traces). Active memory over time
// with each allocation a band and the peak marked, what was live at the peak by stack,
// the allocator state at the end or at a chosen time, OOM triage when the history holds
// one; an allocation selected names the trace's operator running at its time when the
// trace covers it (snapshot/operator). Nothing shows for a run without snapshots.

import { useCallback, useState } from "react";
import { useApi } from "../../api/hooks";
import { DataTable } from "../../components/DataTable";
import { Name } from "../../components/Name";
import { StackFrames } from "../../components/StackFrames";
import { Loaded, Section, Select, Stat } from "../../components/common";
import { setState } from "../../state/store";
import { fmtBytes, fmtCount, fmtDuration } from "../../util/format";
import { SnapshotChart } from "./SnapshotChart";
import { AllocatorState, OomReportView, liveCols } from "./SnapshotState";
import {
  sourceFrames, type SnapAllocation, type SnapshotAtReply, type SnapshotListReply, type SnapshotLiveReply,
  type SnapshotOomsReply, type SnapshotOperatorReply, type SnapshotSummary, type SnapshotTimelineReply,
} from "./snapshotData";

type Sel = { run: string; worker?: string; span?: string };

export function SnapshotSection({ sel, dark }: { sel: Sel; dark: boolean }) {
  const list = useApi<SnapshotListReply>("snapshots", { run: sel.run });
  const names = list.data?.snapshots.map((s) => s.snapshot) ?? [];
  const [picked, setPicked] = useState<string | null>(null);
  if (!names.length) return null;
  const name = picked && names.includes(picked) ? picked : names[0];
  return (
    <Section title={<>Snapshot — <Name text={name} /></>} className="snapshot-section">
      <div aria-label="Snapshot" role="region">
        {names.length > 1 && (
          <div className="controls">
            <Select label="Snapshot" value={name} options={names} onChange={setPicked} />
          </div>
        )}
        <OneSnapshot key={name} sel={sel} name={name} dark={dark} />
      </div>
    </Section>
  );
}

function OneSnapshot({ sel, name, dark }: { sel: Sel; name: string; dark: boolean }) {
  const base = { run: sel.run, snapshot: name };
  const summary = useApi<SnapshotSummary>("snapshot/summary", base);
  const [dev, setDev] = useState<number | null>(null);
  const [win, setWin] = useState<[number, number] | null>(null);
  const [atTime, setAtTime] = useState<number | null>(null);
  const [chosen, setChosen] = useState<SnapAllocation | null>(null);
  const devices = summary.data?.devices ?? [];
  const device = dev !== null && devices.includes(dev) ? dev : devices[0] ?? null;
  const ready = summary.data !== null;
  const timeline = useApi<SnapshotTimelineReply>(ready ? "snapshot/timeline" : null, { ...base, device, start_us: win?.[0], end_us: win?.[1] }, { keepStale: true });
  const live = useApi<SnapshotLiveReply>(ready ? "snapshot/live" : null, { ...base, device });
  const at = useApi<SnapshotAtReply>(ready ? "snapshot/at" : null, { ...base, device, time_us: atTime ?? undefined }, { keepStale: true });
  const ooms = useApi<SnapshotOomsReply>(ready ? "snapshot/ooms" : null, base);
  const onWindow = useCallback((w: [number, number] | null) => setWin(w), []);
  const onSelect = useCallback((a: SnapAllocation) => setChosen(a), []);

  return (
    <Loaded state={summary}>
      {(s) => {
        const range = s.time_range_us;
        // without times (a profile turned snapshot) x is the entry's index: 0 .. the entries
        const t0 = range?.[0] ?? 0;
        const end = range?.[1] ?? Math.max(0, s.history_entries - 1);
        const peakAt = timeline.data?.peak?.time_us ?? null;
        return (
          <>
            <div className="controls">
              {devices.length > 1 && <Select label="Device" value={String(device)} options={devices.map(String)} onChange={(v) => { setDev(Number(v)); setWin(null); setChosen(null); }} />}
            </div>
            <div className="stats" aria-label="Snapshot summary">
              <Stat label="Peak allocated" value={fmtBytes(s.peak_allocated_bytes)} hint="From the allocator's history, replayed as memory_viz does" />
              <Stat label="Reserved" value={fmtBytes(s.reserved_bytes)} hint="At the snapshot's end: the segments' total size" />
              <Stat label="Allocated" value={fmtBytes(s.allocated_bytes)} />
              <Stat label="Free (external)" value={fmtBytes(s.free_external_bytes)} />
              <Stat label="Free (internal)" value={fmtBytes(s.free_internal_bytes)} />
              <Stat label="Segments" value={fmtCount(s.segments)} />
              <Stat label="History entries" value={fmtCount(s.history_entries)} />
              {s.oom_count > 0 && <Stat label="OOMs" value={fmtCount(s.oom_count)} />}
            </div>
            <h3>Active memory over time{device !== null ? ` — device ${device}` : ""}</h3>
            <Loaded state={timeline}>
              {(t) => (
                <>
                  {t.allocations.length < t.allocations_total && <div className="notes-inline">Bands for the {fmtCount(t.allocations.length)} largest of {fmtCount(t.allocations_total)} allocations in this window: zoom in to see the smaller ones.</div>}
                  <SnapshotChart d={t} t0Us={t0} endUs={Math.max(end, t0 + 1)} dark={dark} onSelect={onSelect} onWindow={onWindow} win={win} />
                  <div className="controls">
                    <span className="muted">Wheel or the slider to zoom, drag to pan; hover a band for its size and stack, click it to select it.</span>
                    {peakAt !== null && <button type="button" className="small" onClick={() => setAtTime(peakAt)}>Allocator state at the peak</button>}
                  </div>
                </>
              )}
            </Loaded>
            {chosen && <Chosen a={chosen} stacks={timeline.data?.stacks ?? {}} t0={range ? t0 : null} sel={sel} joinable={range !== null} onAt={() => chosen.start_us !== null && setAtTime(chosen.start_us)} />}
            <h3>Live at the peak, by stack</h3>
            <Loaded state={live}>
              {(l) => <DataTable rows={l.rows} cols={liveCols} exportName={[sel.run, "snapshot-live-at-peak"]} initialSort={{ id: "bytes", desc: true }} emptyText="Nothing live at the peak (no history recorded?)." />}
            </Loaded>
            <h3>Allocator state</h3>
            <Loaded state={at}>{(a) => <AllocatorState at={a} run={sel.run} onEnd={atTime !== null ? () => setAtTime(null) : null} />}</Loaded>
            <Loaded state={ooms}>
              {(o) => o.ooms.length ? (
                <>
                  <h3>Out of memory{o.total > 1 ? ` (${o.total})` : ""}</h3>
                  {o.ooms.map((r, i) => <OomReportView key={i} r={r} run={sel.run} t0Us={range ? t0 : null} n={i + 1} />)}
                </>
              ) : null}
            </Loaded>
          </>
        );
      }}
    </Loaded>
  );
}

/** The allocation selected: its figures, stack, and the trace's operator at its time. */
function Chosen({ a, stacks, t0, sel, joinable, onAt }: {
  a: SnapAllocation; stacks: Record<string, { filename: string; line: number | null; name: string }[]>; t0: number | null;
  sel: Sel; joinable: boolean; onAt: () => void;
}) {
  const op = useApi<SnapshotOperatorReply>(joinable && a.start_us !== null ? "snapshot/operator" : null, { run: sel.run, worker: sel.worker, span: sel.span, time_us: a.start_us ?? undefined });
  const o = op.data;
  const when = (v: number) => (t0 === null ? `entry ${v.toLocaleString("en-US")}` : fmtDuration((v - t0) * 1000));
  return (
    <div className="snapshot-chosen" aria-label="Selected allocation">
      <div className="stats">
        <Stat label="Size" value={fmtBytes(a.size)} hint={`${a.size.toLocaleString("en-US")} bytes`} />
        <Stat label="Allocated at" value={a.start_us === null ? "–" : when(a.start_us)} />
        <Stat label="Freed at" value={a.end_us === null ? "still live" : when(a.end_us)} />
        <Stat label="Address" value={a.addr ?? "–"} />
      </div>
      {o && (o.operator && o.covers ? (
        <div className="controls" aria-label="Operator at this time">
          <span>Ran in <Name text={o.operator.name} /> (the innermost operator of the trace at this time)</span>
          <button type="button" className="small" onClick={() => setState({ view: "Trace", t0: String(o.operator!.start_ns), t1: String(o.operator!.start_ns + Math.max(1, o.operator!.dur_ns)), ev: undefined })}>Show in the trace</button>
        </div>
      ) : <div className="muted">{o.covers ? "No operator of the trace ran at this time." : "The trace does not cover this time (its clock and the snapshot's do not overlap here)."}</div>)}
      <button type="button" className="small" onClick={onAt}>Allocator state when it was allocated</button>
      <StackFrames frames={sourceFrames(stacks[String(a.stack)])} />
    </div>
  );
}
