// The "pie" charts' option builder (components/pie): legend labels, "Other", nesting.
import { describe, expect, it } from "vitest";
import { legendLabels, middleTruncate, otherShare, pieChartOption, pieKind } from "./pie";

const fmt = (v: number) => `${v} ns`;
const S = (name: string, value_ns: number) => ({ name, value_ns });

describe("legend labels", () => {
  it("cut long names in the middle", () => {
    const s = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>";
    const m = middleTruncate(s, 32);
    expect(Array.from(m).length).toBe(32);
    expect(m.startsWith("void at::native")).toBe(true);
    expect(m.endsWith("<float>>")).toBe(true);
    expect(m).toContain("…");
    expect(middleTruncate("short", 32)).toBe("short");
  });
  it("two long names sharing a prefix stay distinct", () => {
    const a = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 3>>(int, A)";
    const b = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 3>>(int, B)";
    const c = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, std::array<char*, 3>>(int, A)";
    const labels = legendLabels([a, b, c], 24);
    const shown = [a, b, c].map((n) => labels.get(n)!);
    expect(new Set(shown).size).toBe(3);
    // the old end-truncation made all three the same text
    expect(new Set([a, b, c].map((n) => n.slice(0, 31) + "…")).size).toBe(1);
  });
  it("names that only differ deep in the middle get longer labels, up to whole", () => {
    const p = "x".repeat(40);
    const a = `${p}A${p}`;
    const b = `${p}B${p}`;
    const labels = legendLabels([a, b, "Other"], 16);
    expect(labels.get(a)).not.toBe(labels.get(b));
    expect(labels.get("Other")).toBe("Other");
  });
  it("the pie's legend formatter renders no two entries the same", () => {
    const names = Array.from({ length: 12 }, (_, i) => `aten::some_really_long_operator_name_prefix_${i}_suffix_common`);
    const { option } = pieChartOption("t", names.map((n, i) => S(n, 100 - i)), { fmt });
    const legend = option.legend as { formatter: (n: string) => string };
    const shown = names.map((n) => legend.formatter(n));
    expect(new Set(shown).size).toBe(names.length);
    expect(shown.filter((l) => Array.from(l).length <= 32).length).toBeGreaterThanOrEqual(8); // only colliding ones grow
  });
  it("bidi controls in a name are shown as markers", () => {
    const labels = legendLabels(["evil\u202Egpj.exe"]);
    expect(labels.get("evil\u202Egpj.exe")).toBe("evil⟨U+202E⟩gpj.exe");
  });
});

describe("pie or bars", () => {
  it("a pie when Other is small", () => {
    const slices = [S("a", 50), S("b", 30), S("Other", 20)];
    expect(otherShare(slices)).toBeCloseTo(0.2);
    const { kind, option } = pieChartOption("t", slices, { fmt });
    expect(kind).toBe("pie");
    expect((option.series as { type: string }[])[0].type).toBe("pie");
  });
  it("bars when Other is above 30 %", () => {
    const slices = [S("a", 30), S("b", 20), S("Other", 50)];
    expect(pieKind(slices)).toBe("bar");
    const { kind, option, subtitle } = pieChartOption("t", slices, { fmt });
    expect(kind).toBe("bar");
    expect((option.series as { type: string }[])[0].type).toBe("bar");
    expect((option.yAxis as { data: string[] }).data).toEqual(["a", "b", "Other"]);
    expect(subtitle).toContain("50%");
  });
  it("nested slices (total times) are never a pie", () => {
    const slices = [S("ProfilerStep#1", 100), S("aten::conv2d", 60), S("aten::convolution", 59)];
    expect(pieKind(slices)).toBe("pie");
    const { kind, option, title, subtitle } = pieChartOption("Host total time", slices, { fmt, nested: true });
    expect(kind).toBe("bar");
    expect((option.series as { type: string }[])[0].type).toBe("bar");
    expect(title).toBe("Host total time");
    expect(subtitle).toContain("include their children");
    // the title and its subtitle are HTML above the chart (components/Chart), never ECharts'
    // title, whose subtitle was drawn over the title
    expect(option.title).toBeUndefined();
  });
});
