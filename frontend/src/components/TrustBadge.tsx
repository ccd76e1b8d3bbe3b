// The trust report (route `integrity`, docs/api.md): a compact badge in the shared header of
// every view ("No problems found" / "N findings") that opens the report — torch's trace
// validator rules and ours, with counts, details and notes — and the small caveat marker a
// figure carries where a finding affects it (step time, idle, launch stats).

import { useState } from "react";
import { useApi } from "../api/hooks";
import { Name } from "./Name";

export interface IntegrityFinding {
  rule: string;
  count: number;
  detail: string;
  event: number | null;
  ts_ns: number | null;
  share: number | null;
}

export interface IntegrityReply {
  rules: Record<string, number>;
  findings: IntegrityFinding[];
  findings_total: number;
  shares: Record<string, number | null>;
  affects: Record<string, string[]>;
  notes: string[];
  total: number;
}

type Sel = { run: string; worker?: string; span?: string };

/** A rule's name as shown: torch's "_check_stream_sync_overlap" reads "stream sync overlap (torch)". */
export function ruleLabel(rule: string): string {
  const torch = rule.startsWith("_check_");
  const words = rule.replace(/^_check_/, "").replace(/_/g, " ");
  return torch ? `${words} (torch)` : words;
}

export function badgeText(d: IntegrityReply): string {
  return d.total ? `${d.total} finding${d.total === 1 ? "" : "s"}` : "No problems found";
}

/** The report itself: flagged rules first, then the ones that pass, the findings, the notes. */
export function TrustReport({ data, onClose }: { data: IntegrityReply; onClose?: () => void }) {
  const rules = Object.entries(data.rules).sort((a, b) => Number(b[1] > 0) - Number(a[1] > 0));
  return (
    <div className="popover trust-report" role="dialog" aria-label="Trust report">
      <div className="popover-head">
        <b>Trust report: {badgeText(data)}</b>
        {onClose && <button type="button" className="icon-btn" onClick={onClose} aria-label="Close">✕</button>}
      </div>
      <table className="trust-rules">
        <tbody>
          {rules.map(([rule, n]) => (
            <tr key={rule} className={n ? "flagged" : "ok"} data-rule={rule}>
              <td title={rule}>{ruleLabel(rule)}</td>
              <td className="num">{n}</td>
              <td className="num">{data.shares[rule] ? `${(100 * (data.shares[rule] ?? 0)).toFixed(1)} %` : ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {data.findings.length > 0 && (
        <ul className="skipped trust-findings">
          {data.findings.map((f, i) => (
            <li key={i}>
              <span className="mono">{ruleLabel(f.rule)}</span>{f.count > 1 ? ` ×${f.count}` : ""}
              <div className="muted"><Name text={f.detail} /></div>
            </li>
          ))}
          {data.findings_total > data.findings.length && (
            <li className="muted">… and {data.findings_total - data.findings.length} more findings</li>
          )}
        </ul>
      )}
      {data.notes.map((n, i) => <div key={i} className="muted small-note">{n}</div>)}
    </div>
  );
}

/** The badge with its report, from an answer already fetched (unit-testable). */
export function TrustBadgeView({ data }: { data: IntegrityReply }) {
  const [open, setOpen] = useState(false);
  return (
    <div className="status-area trust">
      <button
        type="button"
        className={data.total ? "badge warn trust-badge" : "badge trust-badge"}
        data-total={data.total}
        aria-expanded={open}
        title="What in this trace makes its figures less than exact (torch's trace validator rules and ours)"
        onClick={() => setOpen((o) => !o)}
      >
        {data.total ? "⚠ " : "✓ "}{badgeText(data)}
      </button>
      {open && <TrustReport data={data} onClose={() => setOpen(false)} />}
    </div>
  );
}

/** The badge for the selected trace (nothing until the route answers, or on an error). */
export function TrustBadge({ sel }: { sel: Sel }) {
  const state = useApi<IntegrityReply>(sel.run ? "integrity" : null, sel);
  return state.data ? <TrustBadgeView data={state.data} /> : null;
}

/** The rules that make one figure less exact, from an answer (empty: no caveat). */
export function caveatRules(data: IntegrityReply | null, figure: string): string[] {
  return data?.affects?.[figure] ?? [];
}

/** A small marker beside a figure a finding affects; its title names the findings. */
export function Caveat({ sel, figure }: { sel: Sel; figure: "step_time" | "idle" | "launches" }) {
  const state = useApi<IntegrityReply>(sel.run ? "integrity" : null, sel);
  const rules = caveatRules(state.data, figure);
  if (!rules.length || !state.data) return null;
  const text = rules.map((r) => `${ruleLabel(r)}: ${state.data!.rules[r]}`).join("; ");
  return (
    <span className="caveat" data-figure={figure} title={`Caveat (see the trust report): ${text}`} aria-label={`Caveat: ${text}`}>
      ⚠
    </span>
  );
}
