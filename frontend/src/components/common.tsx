// Small building blocks shared by the views.

import { useState, type ReactNode } from "react";
import type { ApiState } from "../api/hooks";
import type { LoadingReply } from "../api/types/status";
import { fmtBytes, fmtCount } from "../util/format";
import { showBidiControls } from "../util/bidi";
import { Name } from "./Name";

/** The backend's "notes": why a part is empty or partial, in words. */
export function Notes({ notes }: { notes?: (string | null | undefined)[] | null }) {
  const list = (notes ?? []).filter((n): n is string => !!n);
  if (!list.length) return null;
  return (
    <ul className="notes" aria-label="Notes">
      {list.map((n, i) => (
        <li key={i}><Name text={n} /></li>
      ))}
    </ul>
  );
}

/** An empty state that says why. */
export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <div className="empty-title">{title}</div>
      {children && <div className="empty-body">{children}</div>}
    </div>
  );
}

export function Progress({ progress }: { progress: LoadingReply | null }) {
  // the distributed routes count ranks while their summaries are built
  if (progress && progress.summarized !== undefined && progress.total) return <RankProgress progress={progress} />;
  const total = progress?.total_bytes ?? 0;
  const done = progress?.loaded_bytes ?? 0;
  const pct = total > 0 ? Math.min(100, (100 * done) / total) : null;
  return (
    <div className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      <span>
        {progress?.computing ? "Analyzing the trace (large traces take a while)" : progress ? "Loading traces" : "Loading"}
        {progress?.run ? ` of ${progress.run}` : ""}
        {pct !== null ? ` — ${fmtBytes(done)} of ${fmtBytes(total)} (${pct.toFixed(0)}%)` : "…"}
      </span>
      {pct !== null && (
        <span className="progress-bar" aria-hidden="true">
          <span style={{ width: `${pct}%` }} />
        </span>
      )}
    </div>
  );
}

export function rankProgressText(k: number, n: number): string {
  return `Summarizing ${fmtCount(k)} / ${fmtCount(n)} ranks…`;
}

/** "Summarizing k / n ranks…" with a bar: a 202 of a distributed route. */
function RankProgress({ progress }: { progress: LoadingReply }) {
  const k = progress.summarized ?? 0;
  const n = progress.total ?? 0;
  const pct = Math.min(100, Math.max(0, (100 * k) / n));
  return (
    <div className="loading" role="status" aria-live="polite" data-summarized={k} data-total={n}>
      <span className="rank-progress-text">
        {rankProgressText(k, n)}
        {progress.failed ? ` (${fmtCount(progress.failed)} could not be read: see the skipped files)` : ""}
      </span>
      <span className="progress-bar" role="progressbar" aria-valuemin={0} aria-valuemax={n} aria-valuenow={k} aria-label="Ranks summarized">
        <span style={{ width: `${pct}%` }} />
      </span>
    </div>
  );
}

export function ErrorBox({ error }: { error: Error }) {
  return (
    <div className="error" role="alert">
      {error.message}
    </div>
  );
}

/**
 * Renders the loading / error state of one request, or its data through `children`.
 */
export function Loaded<T>({ state, children }: { state: ApiState<T>; children: (data: T) => ReactNode }) {
  if (state.error) return <ErrorBox error={state.error} />;
  if (state.data === null) return state.loading ? <Progress progress={state.progress} /> : null;
  return <>{children(state.data)}</>;
}

export function Section({ title, children, actions, className }: { title: ReactNode; children: ReactNode; actions?: ReactNode; className?: string }) {
  return (
    <section className={"card " + (className ?? "")}>
      <header className="card-head">
        <h2>{title}</h2>
        {actions && <div className="card-actions">{actions}</div>}
      </header>
      <div className="card-body">{children}</div>
    </section>
  );
}

export function Select({
  label, value, options, onChange, disabled, title, name,
}: {
  label: string;
  value: string;
  options: (string | { value: string; label: string })[];
  onChange: (v: string) => void;
  disabled?: boolean;
  title?: string;
  /** the accessible name where `label` alone repeats on the page (the Diff's "Run" of A and of B) */
  name?: string;
}) {
  return (
    <label className="select" title={title}>
      <span className="select-label">{label}</span>
      <select value={value} onChange={(e) => onChange(e.target.value)} disabled={disabled} title={showBidiControls(value)} aria-label={name}>
        {options.map((o) => {
          const v = typeof o === "string" ? o : o.value;
          // run / worker / span names: an <option> holds text only, so bidi controls are shown as markers
          const l = showBidiControls(typeof o === "string" ? o : o.label);
          return (
            <option key={v} value={v}>
              {l}
            </option>
          );
        })}
      </select>
    </label>
  );
}

export function Stat({ label, value, hint }: { label: string; value: ReactNode; hint?: string }) {
  return (
    <div className="stat" title={hint}>
      <div className="stat-value">{value}</div>
      <div className="stat-label">{label}</div>
    </div>
  );
}

export function Tabs<T extends string>({ value, options, onChange, label }: { value: T; options: { value: T; label: string }[]; onChange: (v: T) => void; label: string }) {
  return (
    <div className="seg" role="tablist" aria-label={label}>
      {options.map((o) => (
        <button
          key={o.value}
          type="button"
          role="tab"
          aria-selected={o.value === value}
          className={o.value === value ? "on" : ""}
          onClick={() => onChange(o.value)}
        >
          {o.label}
        </button>
      ))}
    </div>
  );
}

/** A key/value list of untrusted text (text values isolated, components/Name). */
export function KeyValues({ items }: { items: [string, ReactNode][] }) {
  return (
    <dl className="kv">
      {items.map(([k, v]) => (
        <div key={k} className="kv-row">
          <dt>{k}</dt>
          <dd>{typeof v === "string" ? <Name text={v} /> : v}</dd>
        </div>
      ))}
    </dl>
  );
}

export function useToggle(initial = false): [boolean, () => void] {
  const [v, setV] = useState(initial);
  return [v, () => setV((x) => !x)];
}

/** Evidence folded behind its title (a long table under an answer): closed until asked for,
 * its summary saying what it holds, so a view's first screen keeps its conclusion. */
export function Fold({ title, summary, className, children }: { title: string; summary?: ReactNode; className?: string; children: ReactNode }) {
  return (
    <details className={"fold " + (className ?? "")}>
      <summary><span className="fold-title">{title}</span>{summary ? <span className="muted"> · {summary}</span> : null}</summary>
      {children}
    </details>
  );
}
