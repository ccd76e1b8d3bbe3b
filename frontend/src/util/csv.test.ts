import { describe, expect, it } from "vitest";
import { csvField, csvFileName, tableFileName, toCsv } from "./csv";

describe("csvField", () => {
  it("quotes commas, quotes and line breaks, doubling quotes", () => {
    expect(csvField("plain")).toBe("plain");
    expect(csvField("a,b")).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField("line1\nline2")).toBe('"line1\nline2"');
    expect(csvField("cr\rhere")).toBe('"cr\rhere"');
    expect(csvField(" padded ")).toBe('" padded "');
  });
  it("neutralizes formula-looking text but not numbers", () => {
    expect(csvField("=HYPERLINK(\"x\")")).toBe('"\'=HYPERLINK(""x"")"');
    expect(csvField("+cmd")).toBe("'+cmd");
    expect(csvField("-1+1")).toBe("'-1+1");
    expect(csvField("@SUM(A1)")).toBe("'@SUM(A1)");
    expect(csvField(-5)).toBe("-5");
    expect(csvField(1.5e-7)).toBe("1.5e-7");
  });
  it("writes empty fields for missing values", () => {
    expect(csvField(null)).toBe("");
    expect(csvField(undefined)).toBe("");
    expect(csvField(NaN)).toBe("");
    expect(csvField(true)).toBe("true");
  });
});

describe("toCsv", () => {
  it("joins rows with CRLF", () => {
    const s = toCsv(["Name", "Calls"], [["aten::add", 3], ["void k<float, 2>(x)", 1]]);
    expect(s).toBe('Name,Calls\r\naten::add,3\r\n"void k<float, 2>(x)",1\r\n');
  });
});

describe("csvFileName", () => {
  it("keeps safe characters only", () => {
    expect(csvFileName("exp1/resnet", "operators")).toBe("exp1_resnet-operators.csv");
    expect(csvFileName("../../etc", "")).toBe("etc.csv");
    expect(csvFileName()).toBe("table.csv");
  });
});

describe("tableFileName", () => {
  it("names the view unless a part starts with it, and says when a filter kept only some rows", () => {
    expect(tableFileName(["resnet", "worker0", "span1", "operators", "Operation"], "Operator", false))
      .toBe("resnet-worker0-span1-operators-Operation.csv");
    expect(tableFileName(["resnet", "steps"], "Overview", true)).toBe("Overview-resnet-steps-filtered.csv");
    expect(tableFileName(["diff", "kernels"], "Diff", false)).toBe("diff-kernels.csv");
    expect(tableFileName(["../x", null, undefined], undefined, false)).toBe("x.csv");
  });
});
