import { describe, expect, it } from "vitest";
import {
  claimTableId, decodeSort, encodeSort, exportLabel, exportTitle, ownsTableId, readTableState, tableId, tablePatch,
  type TableDefaults, type TableState,
} from "./tableState";
import { parseState, serializeState, type AppState } from "../state/url";

const COLS = ["name", "calls", "dself", "hself"];
const DEF: TableDefaults = { sorting: [{ id: "dself", desc: true }], pageSize: 100 };
const ALL = { sort: true, filter: true };

/** The app state after writing a table's state, as store.setState applies a patch. */
function apply(st: Partial<AppState>, patch: Partial<AppState>): AppState {
  const next: Record<string, string> = { ...(st as Record<string, string>) };
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) delete next[k];
    else next[k] = v as string;
  }
  return { view: "Operator", ...next } as AppState;
}

describe("tableId", () => {
  it("is stable, short and a valid URL id, and differs by view and by columns", () => {
    const a = tableId("Operator", COLS);
    expect(a).toMatch(/^t[0-9a-z]{4}$/);
    expect(tableId("Operator", [...COLS])).toBe(a);
    expect(tableId("Diff", COLS)).not.toBe(a);
    expect(tableId("Operator", [...COLS, "python"])).not.toBe(a);
  });
  it("takes an explicit key when it is a valid id", () => {
    expect(tableId("Operator", COLS, "ops")).toBe("ops");
    expect(tableId("Operator", COLS, "Bad Key!")).toBe(tableId("Operator", COLS));
  });
});

describe("sort in the URL", () => {
  it("encodes direction and order, 'none' for no sort", () => {
    expect(encodeSort([{ id: "dself", desc: true }, { id: "name", desc: false }])).toBe("-dself,name");
    expect(encodeSort([])).toBe("none");
  });
  it("decodes only the table's own columns, once each", () => {
    expect(decodeSort("-dself,name", COLS)).toEqual([{ id: "dself", desc: true }, { id: "name", desc: false }]);
    expect(decodeSort("none", COLS)).toEqual([]);
    expect(decodeSort(undefined, COLS)).toBeNull();
    expect(decodeSort("-nope", COLS)).toBeNull();
    expect(decodeSort("calls,-calls", COLS)).toBeNull();
    expect(decodeSort("", COLS)).toBeNull();
    expect(decodeSort("--calls", COLS)).toBeNull();
    expect(decodeSort("name,calls,dself,hself,name", COLS)).toBeNull();
  });
});

describe("table state in the URL", () => {
  const seen: TableState = { sorting: [{ id: "calls", desc: false }], pageIndex: 2, pageSize: 250, filter: "conv 2d&x=#" };

  it("round-trips through the URL's text", () => {
    const st = apply({ view: "Operator", run: "r" }, tablePatch("t1", seen, DEF, ALL));
    const back = parseState("#" + serializeState(st));
    expect(readTableState(back, "t1", DEF, COLS)).toEqual(seen);
    expect(serializeState(st)).toBe("run=r&view=Operator&t1.page=3&t1.q=conv%202d%26x%3D%23&t1.size=250&t1.sort=calls");
  });
  it("leaves every default out", () => {
    const patch = tablePatch("t1", { sorting: DEF.sorting, pageIndex: 0, pageSize: 100, filter: "" }, DEF, ALL);
    expect(serializeState(apply({ view: "Operator" }, patch))).toBe("view=Operator");
    // a default sort turned off is not the default: it is written
    expect(tablePatch("t1", { sorting: [], pageIndex: 0, pageSize: 100, filter: "" }, DEF, ALL)["t1.sort"]).toBe("none");
  });
  it("removes what a previous state wrote", () => {
    const before = apply({ view: "Operator" }, tablePatch("t1", seen, DEF, ALL));
    const after = apply(before, tablePatch("t1", { ...seen, pageIndex: 0, filter: "" }, DEF, ALL));
    expect(after["t1.page"]).toBeUndefined();
    expect(after["t1.q"]).toBeUndefined();
    expect(after["t1.sort"]).toBe("calls");
  });
  it("does not write what the server sorts or the view holds", () => {
    const patch = tablePatch("t1", seen, DEF, { sort: false, filter: false });
    expect(patch["t1.sort"]).toBeUndefined();
    expect(patch["t1.q"]).toBeUndefined();
    expect(patch["t1.page"]).toBe("3");
  });
  it("reads garbage as the defaults", () => {
    const st = parseState("#view=Operator&t1.sort=-bogus&t1.page=0&t1.size=7&t1.q=");
    expect(readTableState(st, "t1", DEF, COLS)).toEqual({ sorting: DEF.sorting, pageIndex: 0, pageSize: 100, filter: "" });
    for (const page of ["-1", "1.5", "abc", "2e3", "99999999"]) {
      expect(readTableState({ view: "Operator", "t1.page": page }, "t1", DEF, COLS).pageIndex).toBe(0);
    }
    expect(readTableState({ view: "Operator", "t1.page": "12" }, "t1", DEF, COLS).pageIndex).toBe(11);
    expect(readTableState({ view: "Operator", "t1.q": "x".repeat(5000) }, "t1", DEF, COLS).filter).toHaveLength(500);
  });
  it("keeps tables apart", () => {
    const st = apply({ view: "Operator" }, tablePatch("t1", seen, DEF, ALL));
    expect(readTableState(st, "t2", DEF, COLS)).toEqual({ sorting: DEF.sorting, pageIndex: 0, pageSize: 100, filter: "" });
  });
});

describe("claims", () => {
  it("the first table mounted with an id owns it; the next one takes over when it goes", () => {
    const a = {};
    const b = {};
    expect(ownsTableId("tz", b)).toBe(true); // none registered: a lone table reads the URL at once
    const releaseA = claimTableId("tz", a);
    const releaseB = claimTableId("tz", b);
    expect(ownsTableId("tz", a)).toBe(true);
    expect(ownsTableId("tz", b)).toBe(false);
    releaseA();
    expect(ownsTableId("tz", b)).toBe(true);
    releaseB();
  });
});

describe("export label", () => {
  const sort = [{ header: "Device self", desc: true }];
  it("says all rows when nothing is filtered", () => {
    expect(exportLabel({ shown: 312, total: 312, filter: "", sort: [] })).toBe("Export CSV (all 312 rows)");
    expect(exportLabel({ shown: 1234, total: 1234, filter: "", sort })).toBe("Export CSV (all 1,234 rows, sorted by Device self ▼)");
    expect(exportLabel({ shown: 1, total: 1, filter: "", sort: [] })).toBe("Export CSV (the 1 row)");
    expect(exportLabel({ shown: 0, total: 0, filter: "", sort: [] })).toBe("Export CSV (no rows)");
  });
  it("says how many of how many, the filter and the order", () => {
    expect(exportLabel({ shown: 20, total: 312, filter: "conv", sort: [...sort, { header: "Name", desc: false }] }))
      .toBe("Export CSV (20 of 312 rows, filtered 'conv', sorted by Device self ▼, then Name ▲)");
    expect(exportLabel({ shown: 0, total: 312, filter: "zzz", sort: [] })).toBe("Export CSV (0 of 312 rows, filtered 'zzz')");
  });
  it("shortens a long filter and shows bidi controls; the title has it whole with the file name", () => {
    const long = "aten::convolution_backward_overrideable";
    expect(exportLabel({ shown: 2, total: 9, filter: long, sort: [] })).toBe("Export CSV (2 of 9 rows, filtered 'aten::convolution_backw…')");
    expect(exportLabel({ shown: 2, total: 9, filter: "a\u202Eb", sort: [] })).toContain("filtered 'a⟨U+202E⟩b'");
    expect(exportTitle({ shown: 2, total: 9, filter: long, sort }, "x-filtered.csv"))
      .toBe(`Download 2 of 9 rows, filtered '${long}', sorted by Device self ▼, every page, as x-filtered.csv (exact values, units in the headers)`);
  });
});
