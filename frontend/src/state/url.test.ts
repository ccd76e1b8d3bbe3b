import { describe, expect, it } from "vitest";
import {
  hrefWithHash, isTableKey, mergeIntoTbHash, parseState, patchTo, sameState, serializeState, splitPairs, stateFromTbHash,
  tableKeys,
} from "./url";

describe("parseState / serializeState", () => {
  it("round-trips names with reserved characters", () => {
    const st = {
      view: "Operator" as const,
      run: "exp 1/resnet&co=#1",
      worker: "host_123.ünïcode",
      span: "2",
      q: "aten::add %",
    };
    const h = serializeState(st);
    expect(h.includes("#")).toBe(false);
    expect(h.split("&")).toHaveLength(5);
    expect(parseState("#" + h)).toEqual(st);
  });
  it("orders keys and drops empties", () => {
    expect(serializeState({ view: "Trace", span: "1", run: "r", worker: "" })).toBe(
      "run=r&span=1&view=Trace",
    );
  });
  it("defaults and normalizes the view, ignores unknown keys", () => {
    expect(parseState("")).toEqual({ view: "Overview" });
    expect(parseState("#view=kernel&bogus=1")).toEqual({ view: "Kernel" });
    // an unknown view is kept as badView: the app says "view 'nope' not found", not a silent Overview
    expect(parseState("#view=nope&run=a")).toEqual({ view: "Overview", run: "a", badView: "nope" });
  });
  it("survives malformed escapes", () => {
    expect(parseState("#run=%E0%A4%A&view=Trace")).toEqual({ view: "Trace", run: "%E0%A4%A" });
  });
  it("compares states", () => {
    expect(sameState({ view: "Overview", run: "a" }, { run: "a", view: "Overview" })).toBe(true);
    expect(sameState({ view: "Overview", run: "a" }, { view: "Overview", run: "b" })).toBe(false);
  });
});

describe("TensorBoard hash", () => {
  it("reads only our prefixed keys", () => {
    expect(stateFromTbHash("#scalars&tagFilter=x")).toBeNull();
    expect(
      stateFromTbHash("#pytorch_profiler&p.pytorch_profiler.run=a%2Fb&p.pytorch_profiler.view=Memory&p.other.run=z"),
    ).toEqual({ run: "a/b", view: "Memory" });
  });
  it("merges our keys after TensorBoard's own, replacing old ones", () => {
    const h = mergeIntoTbHash("#pytorch_profiler&smoothing=0.6&p.pytorch_profiler.run=old", {
      view: "Trace",
      run: "new run",
    });
    expect(h).toBe("#pytorch_profiler&smoothing=0.6&p.pytorch_profiler.run=new%20run&p.pytorch_profiler.view=Trace");
    expect(stateFromTbHash(h)).toEqual({ run: "new run", view: "Trace" });
    expect(splitPairs(h)[0]).toEqual(["pytorch_profiler", null]);
  });
  it("starts a hash when TensorBoard has none", () => {
    expect(mergeIntoTbHash("", { view: "Overview" })).toBe("#p.pytorch_profiler.view=Overview");
  });
});

describe("hrefWithHash", () => {
  it("replaces the fragment of the full address", () => {
    expect(hrefWithHash("http://h:6006/data/plugin_entry.html?name=pytorch_profiler", "view=Trace")).toBe(
      "http://h:6006/data/plugin_entry.html?name=pytorch_profiler#view=Trace",
    );
    expect(hrefWithHash("http://h/#old", "new")).toBe("http://h/#new");
    expect(hrefWithHash("http://h/#old", "")).toBe("http://h/");
  });
});

describe("table keys", () => {
  it("are '<id>.<field>' with a short lower-case id and a known field", () => {
    expect(isTableKey("t0a9z.sort")).toBe(true);
    expect(isTableKey("ops.q")).toBe(true);
    expect(isTableKey("ops.size")).toBe(true);
    expect(isTableKey("ops.sorted")).toBe(false);
    expect(isTableKey("Ops.sort")).toBe(false);
    expect(isTableKey("a.b.sort")).toBe(false);
    expect(isTableKey(".sort")).toBe(false);
    expect(isTableKey(`${"a".repeat(41)}.sort`)).toBe(false);
    expect(isTableKey("view")).toBe(false);
  });
  it("round-trip after the fixed keys, sorted, with the filter's reserved characters", () => {
    const st = { view: "Operator" as const, run: "r", "tb.sort": "-dself", "ta.q": "a&b=c #1", "ta.page": "3" };
    const h = serializeState(st);
    expect(h).toBe("run=r&view=Operator&ta.page=3&ta.q=a%26b%3Dc%20%231&tb.sort=-dself");
    expect(parseState("#" + h)).toEqual(st);
  });
  it("unknown and malformed table keys are ignored", () => {
    expect(parseState("#view=Kernel&x.color=red&T1.sort=a&t1.sort=&t1.page=2")).toEqual({ view: "Kernel", "t1.page": "2" });
  });
  it("travel through TensorBoard's hash", () => {
    const h = mergeIntoTbHash("#pytorch_profiler", { view: "Kernel", run: "r", "t1.sort": "-total", "t1.q": "gemm" });
    expect(h).toBe("#pytorch_profiler&p.pytorch_profiler.run=r&p.pytorch_profiler.view=Kernel"
      + "&p.pytorch_profiler.t1.q=gemm&p.pytorch_profiler.t1.sort=-total");
    expect(stateFromTbHash(h)).toEqual({ view: "Kernel", run: "r", "t1.sort": "-total", "t1.q": "gemm" });
    expect(stateFromTbHash("#pytorch_profiler&p.pytorch_profiler.x.bogus=1")).toBeNull();
  });
  it("are listed", () => {
    expect(tableKeys({ view: "Overview", run: "r", "a.sort": "x", "b.page": "2" }).sort()).toEqual(["a.sort", "b.page"]);
  });
});

describe("patchTo", () => {
  it("removes what the target lacks and sets what it has", () => {
    const from = { view: "Operator" as const, run: "a", q: "conv", "t1.page": "2" };
    const to = { view: "Kernel" as const, run: "b", "t2.sort": "calls" };
    const patch = patchTo(from, to);
    expect(patch).toEqual({ view: "Kernel", run: "b", q: undefined, "t1.page": undefined, "t2.sort": "calls", badView: undefined });
    // applied as store.setState applies a patch
    const next: Record<string, string> = { ...from };
    for (const [k, v] of Object.entries(patch)) {
      if (v === undefined) delete next[k];
      else next[k] = v;
    }
    expect(next).toEqual(to);
  });
  it("keeps a link's unknown view as badView", () => {
    expect(patchTo({ view: "Trace" }, parseState("#view=nope")).badView).toBe("nope");
  });
});
