// @vitest-environment jsdom
// The trust badge: its text follows the report's total, a click opens the report listing every
// rule with its count, the findings and the notes; the caveat rules come from `affects`.
import { act } from "react";
import { describe, expect, it } from "vitest";
import { mount } from "../testing/mount";
import { TrustBadgeView, badgeText, caveatRules, ruleLabel, type IntegrityReply } from "./TrustBadge";

const clean: IntegrityReply = {
  rules: { _check_gpu_kernel_causality: 0, stream_overlap: 0 }, findings: [], findings_total: 0,
  shares: {}, affects: { idle: [] }, notes: ["clock corrections between ranks: none for a single trace"], total: 0,
};
const flagged: IntegrityReply = {
  rules: { _check_gpu_kernel_causality: 0, stream_overlap: 2, unlaunched_device_work: 1 },
  findings: [
    { rule: "stream_overlap", count: 2, detail: "device 0 stream 7: 2 events start early", event: 3, ts_ns: 10, share: null },
    { rule: "unlaunched_device_work", count: 1, detail: "1 device events have no launch", event: 5, ts_ns: 20, share: 0.25 },
  ],
  findings_total: 4, shares: { unlaunched_device_work: 0.25 }, affects: { idle: ["stream_overlap"], launches: [] },
  notes: ["a note"], total: 3,
};

describe("TrustBadge", () => {
  it("says no problems when the total is 0", () => {
    const el = mount(<TrustBadgeView data={clean} />);
    const btn = el.querySelector("button.trust-badge")!;
    expect(btn.textContent).toContain("No problems found");
    expect(btn.className).not.toContain("warn");
  });

  it("shows N findings and opens the report", () => {
    const el = mount(<TrustBadgeView data={flagged} />);
    const btn = el.querySelector("button.trust-badge") as HTMLButtonElement;
    expect(btn.textContent).toContain("3 findings");
    expect(btn.getAttribute("data-total")).toBe("3");
    expect(el.querySelector("[role=dialog]")).toBeNull();
    act(() => btn.click());
    const dialog = el.querySelector("[role=dialog]")!;
    expect(dialog).not.toBeNull();
    const rows = [...dialog.querySelectorAll("tr")].map((r) => r.getAttribute("data-rule"));
    expect(rows.slice(0, 2).sort()).toEqual(["stream_overlap", "unlaunched_device_work"]); // flagged first
    expect(rows).toHaveLength(3);
    expect(dialog.textContent).toContain("25.0 %");
    expect(dialog.textContent).toContain("device 0 stream 7");
    expect(dialog.textContent).toContain("and 2 more findings");
    expect(dialog.textContent).toContain("a note");
    act(() => (dialog.querySelector("button[aria-label=Close]") as HTMLButtonElement).click());
    expect(el.querySelector("[role=dialog]")).toBeNull();
  });

  it("labels rules and picks a figure's caveats", () => {
    expect(ruleLabel("_check_stream_sync_overlap")).toBe("stream sync overlap (torch)");
    expect(ruleLabel("steps_left_out")).toBe("steps left out");
    expect(badgeText({ ...clean, total: 1 })).toBe("1 finding");
    expect(caveatRules(flagged, "idle")).toEqual(["stream_overlap"]);
    expect(caveatRules(flagged, "launches")).toEqual([]);
    expect(caveatRules(null, "idle")).toEqual([]);
  });
});
