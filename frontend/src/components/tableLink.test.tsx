// @vitest-environment jsdom
// A table's sort, page and filter in the URL (components/tableState through state/store):
// written as the user changes them, read back when a link is opened, kept apart for a
// table shown twice and for tables inside an expanded row; the Export CSV button says
// what the file holds.
import { act } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { DataTable, type Col } from "./DataTable";
import { tableId } from "./tableState";
import { getState, setState } from "../state/store";
import { parseState, patchTo, type AppState } from "../state/url";
import { mount } from "../testing/mount";

interface R { name: string; calls: number }
const ROWS: R[] = Array.from({ length: 60 }, (_, i) => ({ name: `op${String(i).padStart(2, "0")}${i % 3 === 0 ? "_conv" : ""}`, calls: i }));
const COLS: Col<R>[] = [
  { id: "name", header: "Name", value: (r) => r.name },
  { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
];
const ID = tableId("Operator", COLS.map((c) => c.id));

function table(extra: Partial<Parameters<typeof DataTable<R>>[0]> = {}) {
  return <DataTable rows={ROWS} cols={COLS} exportName={["run", "ops"]} initialSort={{ id: "calls", desc: true }} pageSize={25} {...extra} />;
}

const firstNames = (el: Element) => [...el.querySelectorAll("tbody tr td:first-child")].map((td) => td.textContent);
const click = (el: Element) => act(() => el.dispatchEvent(new MouseEvent("click", { bubbles: true })));
const hashState = (): AppState => parseState(window.location.hash);

function type(input: HTMLInputElement, text: string) {
  // React listens to the native value setter's "input" event
  const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value")!.set!;
  act(() => {
    set.call(input, text);
    input.dispatchEvent(new Event("input", { bubbles: true }));
  });
}

// (in act: the tables of the test are still mounted when this runs, before mount's own clean-up)
afterEach(() => act(() => setState(patchTo(getState(), { view: "Overview" }), true)));

describe("a table's state in the URL", () => {
  it("is written as the user sorts, pages and filters, defaults left out", () => {
    setState({ view: "Operator" }, true);
    const el = mount(table());
    expect(hashState()).toEqual({ view: "Operator" });
    click([...el.querySelectorAll("th button")][0]); // Name: text sorts A to Z first
    expect(hashState()[`${ID}.sort`]).toBe("name");
    click(el.querySelector<HTMLButtonElement>(".pager button:nth-of-type(3)")!); // ›
    expect(hashState()[`${ID}.page`]).toBe("2");
    expect(firstNames(el)[0]).toBe("op25");
    type(el.querySelector<HTMLInputElement>("input.filter")!, "conv");
    const st = hashState();
    expect(st[`${ID}.q`]).toBe("conv");
    expect(st[`${ID}.page`]).toBeUndefined(); // a new filter starts at page 1
    expect(el.querySelector(".export-csv")!.textContent).toBe("Export CSV (20 of 60 rows, filtered 'conv', sorted by Name ▲)");
  });

  it("is read back when a link is opened", () => {
    setState({ view: "Operator", [`${ID}.sort`]: "calls", [`${ID}.page`]: "2", [`${ID}.q`]: "op" }, true);
    const el = mount(table());
    expect(firstNames(el)[0]).toBe("op25"); // ascending calls, second page of 25
    expect(el.querySelector<HTMLInputElement>("input.filter")!.value).toBe("op");
    expect(el.querySelector(".pager")!.textContent).toContain("Page 2 of 3");
    expect(el.querySelector(".export-csv")!.textContent).toBe("Export CSV (60 of 60 rows, filtered 'op', sorted by Calls ▲)");
  });

  it("a page past the end shows the last page, garbage is the default", () => {
    setState({ view: "Operator", [`${ID}.page`]: "9", [`${ID}.sort`]: "-bogus" }, true);
    const el = mount(table());
    expect(el.querySelector(".pager")!.textContent).toContain("Page 3 of 3");
    expect(hashState()[`${ID}.page`]).toBe("3");
    expect(firstNames(el)[0]).toBe("op09_conv"); // the default sort: calls, largest first
  });

  it("a table with no rows yet keeps the link's page for them", () => {
    setState({ view: "Operator", [`${ID}.page`]: "3" }, true);
    mount(table({ rows: [] }));
    expect(hashState()[`${ID}.page`]).toBe("3");
  });

  it("a table shown twice: the first keeps the URL, the second its own state", () => {
    setState({ view: "Operator", [`${ID}.sort`]: "calls" }, true);
    const el = mount(<>{table()}{table()}</>);
    const [a, b] = [...el.querySelectorAll(".table-wrap")];
    expect(firstNames(a)[0]).toBe("op00_conv");
    expect(firstNames(b)[0]).toBe("op59"); // the default sort
    click(b.querySelectorAll("th button")[0]);
    expect(hashState()[`${ID}.sort`]).toBe("calls");
    expect(firstNames(b)[0]).toBe("op00_conv"); // Name ascending, in memory
  });

  it("a table inside an expanded row keeps its state in memory", () => {
    setState({ view: "Operator" }, true);
    const inner = (r: R) => <DataTable rows={[r, { name: "zz", calls: 0 }]} cols={COLS} exportName={["run", r.name, "inner"]} />;
    const el = mount(table({ renderExpanded: inner, cols: [COLS[1], COLS[0]] }));
    click(el.querySelector("button.expander")!);
    const nested = el.querySelector(".detail-row .table-wrap")!;
    click(nested.querySelectorAll("th button")[1]); // its Name column
    expect(Object.keys(hashState())).toEqual(["view"]);
    expect(firstNames(nested)[0]).toBe("op59");
  });

  it("a table without an export name is not linked", () => {
    setState({ view: "Operator", [`${ID}.sort`]: "calls" }, true);
    const el = mount(<DataTable rows={ROWS} cols={COLS} initialSort={{ id: "calls", desc: true }} pageSize={25} />);
    expect(firstNames(el)[0]).toBe("op59");
  });
});
