import { describe, expect, it } from "vitest";
import { escapeHtml, tooltipLine } from "./escape";

describe("escapeHtml", () => {
  it("escapes markup characters", () => {
    expect(escapeHtml(`<img src=x onerror="alert(1)">`)).toBe(
      "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;",
    );
    expect(escapeHtml("void at::native::<lambda>(int&)")).toBe(
      "void at::native::&lt;lambda&gt;(int&amp;)",
    );
    expect(escapeHtml("it's `x`")).toBe("it&#39;s &#96;x&#96;");
    expect(escapeHtml(null)).toBe("");
    expect(escapeHtml(42)).toBe("42");
  });
});

describe("tooltipLine", () => {
  it("escapes label and value and rejects odd colors", () => {
    const s = tooltipLine("red;background:url(x)", "<b>k</b>", "1 < 2");
    expect(s).toContain("&lt;b&gt;k&lt;/b&gt;");
    expect(s).toContain("1 &lt; 2");
    expect(s).toContain("background:#888");
    expect(tooltipLine("#5470c6", "a", "b")).toContain("background:#5470c6");
  });
});
