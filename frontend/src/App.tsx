// The shell: run / worker / span selectors, the view tabs, loading status, and the
// selected view. Everything selected lives in the URL (state/store).

import { useEffect, useMemo, useState } from "react";
import { reloadAll, useApi } from "./api/hooks";
import { skippedFiles } from "./api/skipped";
import type { RunsReply, StatusReply } from "./api/types/status";
import { Empty, ErrorBox, Progress, Select } from "./components/common";
import { Name } from "./components/Name";
import { TrustBadge } from "./components/TrustBadge";
import { onTbHashChange, onTbReload, shareLink } from "./state/host";
import { getState, setState, useAppState } from "./state/store";
import { useDarkMode } from "./state/theme";
import { patchTo, serializeState, tableKeys, VIEW_IDS, type AppState, type ViewId } from "./state/url";
import { fmtBytes } from "./util/format";
import { OverviewView } from "./views/Overview";
import { OperatorView } from "./views/Operator";
import { KernelView } from "./views/Kernel";
import { TraceView } from "./views/Trace";
import { MemoryView } from "./views/Memory";
import { ModuleView } from "./views/Module";
import { DistributedView } from "./views/Distributed";
import { DiffView } from "./views/Diff";
import type { ViewProps } from "./views/props";

const WHY_MISSING: Partial<Record<ViewId, string>> = {
  Kernel: "This trace has no device kernels. Was ProfilerActivity.CUDA (or your device's activity) enabled?",
  Memory: "This trace has no memory records. Profile with profile_memory=True to see memory.",
  Module: "This trace has no nn.Module hierarchy. Recent PyTorch records it with with_stack=True (or with_modules=True).",
  Distributed: "This run has a single worker and no distributed information; the Distributed view needs the traces of every rank of a torch.distributed job.",
};

const RUNS_POLL_MS = 3000;
const SLOW_POLL_MS = 30000;

/** Whether the page is shown (not a background tab): polling slows down while hidden. */
/** A URL's run, worker, span or view that does not exist: said, with what does (a link never
 * shows other numbers under a name it did not ask for). */
function NotFound({ what, name, among, inRun, onOpen }: { what: string; name: string; among: readonly string[]; inRun?: string; onOpen?: (v: string) => void }) {
  const where = inRun ? ` in run '${inRun}'` : "";
  return (
    <Empty title={`${what[0].toUpperCase()}${what.slice(1)} '${name}' not found${where}`}>
      <span role="alert">{`${what} '${name}' not found${where}; ${what}s: ${among.length ? among.slice(0, 20).join(", ") + (among.length > 20 ? ", …" : "") : "none"}.`}</span>
      {onOpen && among.length > 0 && (
        <> <button type="button" className="small" onClick={() => onOpen(among[what === "span" ? among.length - 1 : 0])}>Open {what} {among[what === "span" ? among.length - 1 : 0]}</button></>
      )}
    </Empty>
  );
}

/** "Copy link": the address of what the page shows, run, worker and span named (shareLink). */
function CopyLink({ st }: { st: AppState }) {
  const [done, setDone] = useState<string | null>(null);
  const link = shareLink(st, serializeState(st));
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(link);
      setDone("Copied");
    } catch {
      window.prompt("Copy this link", link); // no clipboard (an http page, a denied permission): show it
      setDone(null);
    }
    setTimeout(() => setDone(null), 2000);
  };
  return (
    <button type="button" className="small" data-link={link}
      title="Copy a link to this view: run, worker, span, view and the view's settings (sort, filter, range, selection)"
      onClick={copy}>
      {done ?? "Copy link"}
    </button>
  );
}

function usePageVisible(): boolean {
  const [v, setV] = useState(() => typeof document === "undefined" || document.visibilityState !== "hidden");
  useEffect(() => {
    const on = () => setV(document.visibilityState !== "hidden");
    document.addEventListener("visibilitychange", on);
    return () => document.removeEventListener("visibilitychange", on);
  }, []);
  return v;
}

function useTicker(ms: number | null): number {
  const [n, setN] = useState(0);
  useEffect(() => {
    if (ms === null) return;
    const t = setInterval(() => setN((x) => x + 1), ms);
    return () => clearInterval(t);
  }, [ms]);
  return n;
}

function StatusBadge({ status }: { status: StatusReply | null }) {
  const [open, setOpen] = useState(false);
  if (!status) return null;
  const problems = skippedFiles(status);
  const pct = status.total_bytes > 0 ? (100 * status.loaded_bytes) / status.total_bytes : null;
  return (
    <div className="status-area">
      {status.loading && (
        <span className="badge" title="Traces are loaded in the background">
          <span className="spinner small" aria-hidden="true" /> Loading
          {pct !== null ? ` ${fmtBytes(status.loaded_bytes)} / ${fmtBytes(status.total_bytes)}` : "…"}
        </span>
      )}
      {problems.length > 0 && (
        <button type="button" className="badge warn" onClick={() => setOpen((o) => !o)} aria-expanded={open}>
          {problems.length} file{problems.length === 1 ? "" : "s"} skipped
        </button>
      )}
      {open && (
        <div className="popover" role="dialog" aria-label="Skipped files">
          <div className="popover-head">
            <b>Files that could not be used</b>
            <button type="button" className="icon-btn" onClick={() => setOpen(false)} aria-label="Close">✕</button>
          </div>
          <ul className="skipped">
            {problems.map((p, i) => (
              <li key={i}>
                <div className="mono"><Name text={p.path} /></div>
                <div className="muted">{p.reason}</div>
              </li>
            ))}
          </ul>
        </div>
      )}
    </div>
  );
}

export function App() {
  const st = useAppState();
  const dark = useDarkMode();
  const visible = usePageVisible();

  useEffect(() => onTbReload(() => reloadAll()), []);
  // a Copy link address pasted into this TensorBoard tab: show what it names (host.ts)
  useEffect(() => onTbHashChange((linked) => setState(patchTo(getState(), linked), true)), []);

  // `runs` is cheap (names only): polled every RUNS_POLL_MS while the page is seen, so a
  // run the server finds shows within seconds. `status` (every file) is asked again when
  // the runs change, every RUNS_POLL_MS while loading, and otherwise every SLOW_POLL_MS;
  // a status that names a run the picker lacks makes `runs` be asked again at once.
  const [runsTick, setRunsTick] = useState(0);
  const runsPoll = useTicker(visible ? RUNS_POLL_MS : SLOW_POLL_MS);
  useEffect(() => setRunsTick((x) => x + 1), [runsPoll]);
  const runs = useApi<RunsReply>("runs", {}, { keepStale: true, noCache: true, tick: runsTick });
  const runsLoading = runs.data?.loading ?? true;
  const runsSig = runs.data ? JSON.stringify([runs.data.runs, runs.data.loading]) : "";
  const [statusTick, setStatusTick] = useState(0);
  const statusPoll = useTicker(runsLoading && visible ? RUNS_POLL_MS : SLOW_POLL_MS);
  useEffect(() => setStatusTick((x) => x + 1), [statusPoll, runsSig]);
  const status = useApi<StatusReply>("status", {}, { keepStale: true, noCache: true, tick: statusTick });
  useEffect(() => {
    if (!status.data || !runs.data) return;
    const known = new Set(runs.data.runs);
    if (status.data.runs.some((r) => r.state !== "failed" && r.files > 0 && !known.has(r.name))) setRunsTick((x) => x + 1);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [status.data]);
  // when background loading finishes, answers computed on partial data are stale
  const [wasLoading, setWasLoading] = useState(false);
  useEffect(() => {
    if (runs.data && runs.data.loading !== wasLoading) {
      if (wasLoading && !runs.data.loading) reloadAll();
      setWasLoading(runs.data.loading);
    }
  }, [runs.data, wasLoading]);

  const runList = runs.data?.runs ?? [];
  // a run the URL names that the logdir lacks is said, never swapped for another run's numbers
  const runMissing = !!st.run && !!runs.data && !runs.data.loading && !runList.includes(st.run);
  // a page opens on a run that can be read; one whose every file failed is listed for its errors
  const failed = new Set(runs.data?.failed ?? []);
  const run = st.run ? (runList.includes(st.run) ? st.run : undefined) : runList.find((r) => !failed.has(r)) ?? runList[0];
  useEffect(() => {
    if (run && !st.run) setState({ run, worker: undefined, span: undefined }, true);
  }, [run, st.run]);

  const views = useApi<string[]>(run ? "views" : null, { run });
  const isDist = st.view === "Distributed";
  const workers = useApi<string[]>(run ? "workers" : null, { run, view: isDist ? "Distributed" : undefined });
  const workerList = workers.data ?? [];
  const workerMissing = !isDist && !!st.worker && workers.data !== null && !workerList.includes(st.worker);
  const worker = isDist ? undefined : st.worker ? (workerList.includes(st.worker) ? st.worker : undefined) : workerList[0];
  const spans = useApi<string[]>(run && (worker || isDist) ? "spans" : null, { run, worker });
  const spanList = spans.data ?? [];
  const spanMissing = !!st.span && spans.data !== null && !!(worker || isDist) && !spanList.includes(st.span);
  const span = st.span ? (spanList.includes(st.span) ? st.span : undefined) : spanList[spanList.length - 1];

  const available = useMemo(() => {
    const v = (views.data ?? []).filter((x): x is ViewId => (VIEW_IDS as string[]).includes(x));
    return [...v, "Diff" as ViewId];
  }, [views.data]);

  // the Trace view's Ranks mode picks ranks itself (views/trace/Ranks)
  const traceRanks = st.view === "Trace" && st.tmode === "ranks" && available.includes("Distributed");
  const sel = useMemo(() => ({ run: run ?? "", worker, span }), [run, worker, span]);

  let body;
  if (runs.error) body = <ErrorBox error={runs.error} />;
  else if (!runs.data) body = <Progress progress={null} />;
  else if (!runList.length)
    body = runs.data.loading ? (
      <Progress progress={status.data ? { loading: true, loaded_bytes: status.data.loaded_bytes, total_bytes: status.data.total_bytes } : null} />
    ) : status.data?.scan_error ? (
      <Empty title="The log directory cannot be read">
        {status.data.scan_error}. Point TensorBoard (or <span className="mono">tb-profiler serve</span>) at the
        folder the traces are written to.
      </Empty>
    ) : (
      <Empty title="No profiler traces found">
        The log directory holds no trace files (<span className="mono">*.json</span> or{" "}
        <span className="mono">*.json.gz</span> with a <span className="mono">traceEvents</span> list) that could
        be read. Write traces with{" "}
        <span className="mono">torch.profiler.tensorboard_trace_handler(dir)</span> (or{" "}
        <span className="mono">tb_profiler.tensorboard_trace_handler</span>) and point the log directory at <span className="mono">dir</span>
        {status.data?.skipped?.length ? "; the files listed as skipped above were found but could not be used." : "."}
      </Empty>
    );
  else if (st.badView) body = <NotFound what="view" name={st.badView} among={VIEW_IDS} />;
  else if (runMissing) body = <NotFound what="run" name={st.run!} among={runList} onOpen={(v) => setState({ run: v, worker: undefined, span: undefined })} />;
  else if (!run) body = <Progress progress={null} />;
  else if (st.view !== "Diff" && workerMissing) body = <NotFound what="worker" name={st.worker!} inRun={run} among={workerList} onOpen={(v) => setState({ worker: v, span: undefined })} />;
  else if (st.view !== "Diff" && spanMissing) body = <NotFound what="span" name={st.span!} inRun={run} among={spanList} onOpen={(v) => setState({ span: v })} />;
  else if (views.error) body = <ErrorBox error={views.error} />;
  else if (st.view !== "Diff" && st.view !== "Overview" && views.data && !available.includes(st.view))
    body = <Empty title={`No ${st.view} view for this run`}>{WHY_MISSING[st.view] ?? "The run has no data for this view."}</Empty>;
  else if (st.view !== "Diff" && ((!isDist && workers.error) || spans.error)) body = <ErrorBox error={(workers.error ?? spans.error)!} />;
  else if (st.view !== "Diff" && (spans.data === null || (!isDist && workers.data === null))) body = <Progress progress={null} />;
  else if (st.view !== "Diff" && !spanList.length)
    body = <Empty title="No readable trace for this worker">Every trace file of this worker failed to load; see the skipped files.</Empty>;
  else {
    const props: ViewProps = { st, sel, dark };
    switch (st.view) {
      case "Operator": body = <OperatorView {...props} />; break;
      case "Kernel": body = <KernelView {...props} />; break;
      case "Trace": body = <TraceView {...props} />; break;
      case "Memory": body = <MemoryView {...props} />; break;
      case "Module": body = <ModuleView {...props} />; break;
      case "Distributed": body = <DistributedView {...props} />; break;
      case "Diff": body = <DiffView {...props} runs={runList} />; break;
      default: body = <OverviewView {...props} />;
    }
  }

  return (
    <div className="app">
      <header className="topbar">
        <h1 className="brand" title="tb_profiler">PyTorch Profiler</h1>
        <Select
          label="Run"
          value={run ?? ""}
          options={runList.length ? runList.map((r) => ({ value: r, label: failed.has(r) ? `${r} (no file could be read)` : r })) : [""]}
          disabled={!runList.length}
          onChange={(v) => setState({ run: v, worker: undefined, span: undefined, t0: undefined, t1: undefined, ev: undefined, r0: undefined, r1: undefined, cp: undefined, m0: undefined, m1: undefined, dev: undefined, step: undefined })}
        />
        {!isDist && !traceRanks && st.view !== "Diff" && (
          <Select
            label="Worker"
            value={worker ?? ""}
            options={workerList.length ? workerList : [""]}
            disabled={workerList.length < 2}
            onChange={(v) => setState({ worker: v, span: undefined, t0: undefined, t1: undefined, ev: undefined, r0: undefined, r1: undefined, cp: undefined, m0: undefined, m1: undefined })}
          />
        )}
        {st.view !== "Diff" && (
          <Select
            label="Span"
            value={span ?? ""}
            options={spanList.length ? spanList : [""]}
            disabled={spanList.length < 2}
            title="Each profiling cycle (schedule repeat) writes one trace per worker: a span"
            onChange={(v) => setState({ span: v, t0: undefined, t1: undefined, ev: undefined, r0: undefined, r1: undefined, cp: undefined, m0: undefined, m1: undefined })}
          />
        )}
        <span className="spacer" />
        {st.view !== "Diff" && run && span && <TrustBadge sel={sel} />}
        <StatusBadge status={status.data} />
        <CopyLink st={{ ...st, run: run ?? st.run, worker: st.view === "Diff" || isDist ? st.worker : worker ?? st.worker, span: st.view === "Diff" ? st.span : span ?? st.span }} />
        <button type="button" className="small" title="Forget cached answers and ask the server again" onClick={() => { reloadAll(); setRunsTick((t) => t + 1); }}>
          Reload
        </button>
      </header>
      <nav className="tabs" role="tablist" aria-label="Views">
        {(views.data ? available : (["Overview", "Diff"] as ViewId[])).map((v) => (
          <button
            key={v}
            type="button"
            role="tab"
            aria-selected={st.view === v}
            className={st.view === v ? "tab on" : "tab"}
            // the tables' sort, page and filter belong to the view left (they would only lengthen the URL)
            onClick={() => setState({ ...Object.fromEntries(tableKeys(st).map((k) => [k, undefined])), view: v, q: undefined, find: undefined })}
          >
            {v}
          </button>
        ))}
        {st.view !== "Diff" && st.view !== "Overview" && views.data && !available.includes(st.view) && (
          <button type="button" role="tab" aria-selected className="tab on missing">{st.view}</button>
        )}
      </nav>
      <main className="content">{body}</main>
    </div>
  );
}
