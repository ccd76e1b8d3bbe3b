// Tables: TanStack Table for sorting, filtering, pagination and expandable rows;
// cells render as React text. Export: CSV of the rows as filtered and sorted (every page),
// raw values with the unit in the header (exact ns and bytes, not the rounded display);
// the button says which rows and in what order. Sort, page, page size and filter live in
// the URL (components/tableState), so a copied link opens the table as it was seen.

import { Fragment, useEffect, useMemo, useState, type ReactNode } from "react";
import {
  flexRender, functionalUpdate, getCoreRowModel, getExpandedRowModel, getFilteredRowModel, getPaginationRowModel,
  getSortedRowModel, useReactTable, type ColumnDef, type ExpandedState, type PaginationState, type Row, type SortingState,
} from "@tanstack/react-table";
import { Name } from "./Name";
import { exportLabel, exportTitle, InsideTable, PAGE_SIZES, tableId, useTableState, type ExportWhat } from "./tableState";
import { useAppState } from "../state/store";
import { copyText, downloadText, tableFileName, toCsv, type CsvCell } from "../util/csv";
import { fmtBytes, fmtCount, fmtDeltaDuration, fmtNumber, fmtPct, fmtUs } from "../util/format";

export type ColKind = "text" | "us" | "delta_us" | "bytes" | "pct" | "count" | "num" | "bool";

export interface Col<T> {
  id: string;
  header: string;
  value: (row: T) => string | number | boolean | null | undefined;
  kind?: ColKind;
  /** custom cell content; defaults to the formatted value */
  render?: (row: T) => ReactNode;
  /** hover text of the header */
  title?: string;
  /** minimum width in px */
  width?: number;
  /** excluded from the text filter */
  noFilter?: boolean;
  /** short text that must not wrap */
  nowrap?: boolean;
  /** numbers sort by their size, whatever their sign (a delta: -5 is a larger change than +3) */
  byMagnitude?: boolean;
}

const UNIT: Partial<Record<ColKind, string>> = { us: " (ns)", delta_us: " (ns)", bytes: " (bytes)", pct: " (%)" };
/** the unit shown in the header of µs columns (their cells are µs numbers) */
const SHOWN_UNIT: Partial<Record<ColKind, string>> = { us: " (µs)", delta_us: " (µs)" };

function fmtCell(kind: ColKind, v: unknown): string {
  if (v === null || v === undefined || v === "") return kind === "text" ? "" : "–";
  switch (kind) {
    case "us": return fmtUs(Number(v));
    case "delta_us": {
      const n = Number(v);
      return n === 0 ? "0" : (n > 0 ? "+" : "") + fmtUs(n);
    }
    case "bytes": return fmtBytes(Number(v));
    case "pct": return fmtPct(Number(v));
    case "count": return fmtCount(Number(v));
    case "num": return fmtNumber(Number(v));
    case "bool": return v ? "yes" : "no";
    default: return String(v);
  }
}

export { fmtDeltaDuration };

interface Props<T> {
  rows: T[];
  cols: Col<T>[];
  /** name of the CSV file, from untrusted parts; a table with one keeps its state in the URL */
  exportName?: (string | undefined | null)[];
  /** the table's id in the URL (components/tableState: by default derived from the view and the columns) */
  urlKey?: string;
  initialSort?: { id: string; desc: boolean };
  pageSize?: number;
  /** sub rows of a tree table */
  getSubRows?: (row: T) => T[] | undefined;
  /** content shown under an expanded row (lazy details) */
  renderExpanded?: (row: T) => ReactNode;
  canExpand?: (row: T) => boolean;
  expandLabel?: string;
  onRowClick?: (row: T) => void;
  rowKey?: (row: T, index: number) => string;
  filterPlaceholder?: string;
  /** extra controls shown in the toolbar */
  toolbar?: ReactNode;
  caption?: string;
  /** expand every tree row at first */
  expandAll?: boolean;
  /** controlled text filter */
  filter?: string;
  onFilterChange?: (v: string) => void;
  emptyText?: string;
  /**
   * Sorting done by the server (the rows come sorted): the header of a column in `ids`
   * asks for it through onChange; the other headers do not sort.
   */
  serverSort?: { id: string; desc: boolean; ids: string[]; onChange: (id: string) => void };
}

export function DataTable<T>(props: Props<T>) {
  const {
    rows, cols, exportName, initialSort, pageSize = 100, getSubRows, renderExpanded, canExpand,
    onRowClick, rowKey, filterPlaceholder, toolbar, caption, expandAll, emptyText, serverSort, urlKey,
  } = props;
  const { view } = useAppState();
  const colIds = cols.map((c) => c.id);
  const defaults = { sorting: initialSort ? [initialSort] : [], pageSize };
  // a table without an export name (a unit test's, an ad-hoc one) is not linked
  const id = exportName || urlKey ? tableId(view, colIds, urlKey) : null;
  const [ts, setTs] = useTableState(id, defaults, colIds, { sort: !serverSort, filter: props.filter === undefined });
  const filter = props.filter ?? ts.filter;
  // a new filter or sort starts at the first page (the rows on page 3 are other rows now)
  const setFilter = (v: string) => {
    if (props.onFilterChange) {
      props.onFilterChange(v);
      if (ts.pageIndex) setTs({ ...ts, pageIndex: 0 });
    } else {
      setTs({ ...ts, filter: v, pageIndex: 0 });
    }
  };
  // stable objects: TanStack recomputes its row models when the state's objects change
  const sorting = useMemo<SortingState>(
    () => (serverSort ? [{ id: serverSort.id, desc: serverSort.desc }] : ts.sorting),
    [serverSort?.id, serverSort?.desc, ts.sorting], // eslint-disable-line react-hooks/exhaustive-deps
  );
  const pagination = useMemo<PaginationState>(() => ({ pageIndex: ts.pageIndex, pageSize: ts.pageSize }), [ts.pageIndex, ts.pageSize]);
  const [expanded, setExpanded] = useState<ExpandedState>(expandAll ? true : {});
  const [copied, setCopied] = useState<string | null>(null);

  const columns = useMemo<ColumnDef<T>[]>(() => {
    const defs: ColumnDef<T>[] = cols.map((c) => ({
      id: c.id,
      header: c.header + (SHOWN_UNIT[c.kind ?? "text"] ?? ""),
      accessorFn: (r: T) => c.value(r),
      enableGlobalFilter: !c.noFilter && (c.kind ?? "text") === "text",
      sortUndefined: "last",
      enableSorting: !serverSort || serverSort.ids.includes(c.id),
      sortDescFirst: (c.kind ?? "text") !== "text",
      sortingFn: (a: Row<T>, b: Row<T>, id: string) => {
        const x = a.getValue(id) as unknown;
        const y = b.getValue(id) as unknown;
        if (x === y) return 0;
        if (x === null || x === undefined) return -1;
        if (y === null || y === undefined) return 1;
        if (typeof x === "number" && typeof y === "number") {
          const [u, v] = c.byMagnitude ? [Math.abs(x), Math.abs(y)] : [x, y];
          return u === v ? 0 : u < v ? -1 : 1;
        }
        if (typeof x === "boolean" && typeof y === "boolean") return x ? 1 : -1;
        return String(x).localeCompare(String(y));
      },
      // names (text cells) are isolated and show their bidi controls (components/Name)
      cell: (info) => (c.render ? c.render(info.row.original) : (c.kind ?? "text") === "text" ? <Name text={fmtCell("text", info.getValue())} /> : fmtCell(c.kind ?? "text", info.getValue())),
      meta: c,
    }));
    return defs;
  }, [cols, serverSort?.ids.join("|")]); // eslint-disable-line react-hooks/exhaustive-deps

  const table = useReactTable<T>({
    data: rows,
    columns,
    state: { sorting, globalFilter: filter, expanded, pagination },
    manualSorting: !!serverSort,
    onSortingChange: (u) => setTs({ ...ts, sorting: functionalUpdate(u, ts.sorting), pageIndex: 0 }),
    onGlobalFilterChange: (u) => setFilter(String(functionalUpdate(u, filter) ?? "")),
    onPaginationChange: (u) => {
      const p = functionalUpdate(u, pagination);
      setTs({ ...ts, pageIndex: p.pageIndex, pageSize: p.pageSize });
    },
    onExpandedChange: setExpanded,
    getSubRows,
    getRowCanExpand: renderExpanded ? (r) => (canExpand ? canExpand(r.original) : true) : undefined,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: getSortedRowModel(),
    getFilteredRowModel: getFilteredRowModel(),
    getExpandedRowModel: getExpandedRowModel(),
    getPaginationRowModel: getPaginationRowModel(),
    filterFromLeafRows: !!getSubRows,
    paginateExpandedRows: false,
    globalFilterFn: (row, columnId, value: string) => {
      const v = row.getValue(columnId);
      return v !== null && v !== undefined && String(v).toLowerCase().includes(String(value).toLowerCase());
    },
    getRowId: rowKey ? (r, i) => rowKey(r, i) : undefined,
    // the page changes with the sort and the filter (above), not when the rows are fetched
    // again: a reload keeps the page a link or the user chose
    autoResetPageIndex: false,
  });

  function exportRows(): string {
    const leafRows = table.getPrePaginationRowModel().flatRows;
    const headers = cols.map((c) => c.header + (UNIT[c.kind ?? "text"] ?? ""));
    const data: CsvCell[][] = leafRows.map((r) => cols.map((c) => {
      const v = c.value(r.original);
      return typeof v === "boolean" ? v : (v as CsvCell);
    }));
    if (getSubRows) headers.unshift("Depth");
    if (getSubRows) leafRows.forEach((r, i) => data[i].unshift(r.depth));
    return toCsv(headers, data);
  }

  const filteredCount = table.getPrePaginationRowModel().rows.length;
  const pageCount = table.getPageCount();
  const ncols = cols.length + (renderExpanded ? 1 : 0);
  const totalCount = getSubRows ? table.getCoreRowModel().flatRows.length : rows.length;
  const shownCount = getSubRows ? table.getPrePaginationRowModel().flatRows.length : filteredCount;

  // a page past the end (fewer rows now, or a hand-edited link) shows the last page; not
  // while there are no rows at all (still coming: the link's page is kept for them)
  const lastPage = Math.max(0, pageCount - 1);
  useEffect(() => {
    if (rows.length > 0 && ts.pageIndex > lastPage) setTs({ ...ts, pageIndex: lastPage });
  }, [ts.pageIndex, lastPage, rows.length]); // eslint-disable-line react-hooks/exhaustive-deps

  const what: ExportWhat = {
    shown: shownCount,
    total: totalCount,
    filter,
    sort: sorting.map((s) => ({ header: cols.find((c) => c.id === s.id)?.header ?? s.id, desc: s.desc })),
  };
  const fileName = tableFileName(exportName ?? ["table"], view, filter !== "");

  return (
    <div className="table-wrap">
      <div className="table-toolbar">
        {caption && <span className="table-caption">{caption}</span>}
        <input
          type="search"
          className="filter"
          placeholder={filterPlaceholder ?? "Filter by name…"}
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
          aria-label="Filter rows"
        />
        {toolbar}
        <span className="spacer" />
        <span className="muted">
          {shownCount === totalCount
            ? `${fmtCount(totalCount)} row${totalCount === 1 ? "" : "s"}`
            : `${fmtCount(shownCount)} of ${fmtCount(totalCount)} rows`}
        </span>
        {getSubRows && (
          <button type="button" onClick={() => table.toggleAllRowsExpanded()} className="small">
            {table.getIsAllRowsExpanded() ? "Collapse all" : "Expand all"}
          </button>
        )}
        <button type="button" className="small export-csv" title={exportTitle(what, fileName)} onClick={() => downloadText(fileName, exportRows())}>
          {exportLabel(what)}
        </button>
        <button
          type="button"
          className="small"
          title="Copy the same rows as CSV"
          onClick={async () => {
            const ok = await copyText(exportRows());
            setCopied(ok ? "Copied" : "Copy failed");
            setTimeout(() => setCopied(null), 1500);
          }}
        >
          {copied ?? "Copy CSV"}
        </button>
      </div>
      <div className="table-scroll">
        <table className="data">
          <thead>
            {table.getHeaderGroups().map((hg) => (
              <tr key={hg.id}>
                {renderExpanded && <th className="expander-col" />}
                {hg.headers.map((h) => {
                  const c = h.column.columnDef.meta as Col<T>;
                  const sorted = h.column.getIsSorted();
                  return (
                    <th
                      key={h.id}
                      className={(c.kind ?? "text") === "text" ? "t-left" : "t-right"}
                      style={c.width ? { minWidth: c.width } : undefined}
                      title={c.title}
                      aria-sort={sorted === "asc" ? "ascending" : sorted === "desc" ? "descending" : "none"}
                    >
                      <button
                        type="button"
                        className="th-sort"
                        title={serverSort && h.column.getCanSort() ? "Sort on the server, largest first" : undefined}
                        onClick={serverSort ? () => h.column.getCanSort() && serverSort.onChange(h.column.id) : h.column.getToggleSortingHandler()}
                      >
                        {flexRender(h.column.columnDef.header, h.getContext())}
                        <span className="sort-mark">{sorted === "asc" ? " ▲" : sorted === "desc" ? " ▼" : ""}</span>
                      </button>
                    </th>
                  );
                })}
              </tr>
            ))}
          </thead>
          <tbody>
            {table.getRowModel().rows.map((row) => (
              <Fragment key={row.id}>
                <tr
                  className={(onRowClick ? "clickable " : "") + (row.getIsExpanded() && renderExpanded ? "expanded" : "")}
                  onClick={onRowClick ? () => onRowClick(row.original) : undefined}
                  // a row that opens something is reached with Tab and opened with Enter or Space, as a button is
                  tabIndex={onRowClick ? 0 : undefined}
                  onKeyDown={onRowClick ? (e) => {
                    if ((e.key === "Enter" || e.key === " ") && e.target === e.currentTarget) { e.preventDefault(); onRowClick(row.original); }
                  } : undefined}
                >
                  {renderExpanded && (
                    <td className="expander-col">
                      {row.getCanExpand() ? (
                        <button
                          type="button"
                          className="expander"
                          aria-expanded={row.getIsExpanded()}
                          aria-label={row.getIsExpanded() ? "Collapse" : props.expandLabel ?? "Expand"}
                          title={props.expandLabel}
                          onClick={(e) => {
                            e.stopPropagation();
                            row.toggleExpanded();
                          }}
                        >
                          {row.getIsExpanded() ? "▾" : "▸"}
                        </button>
                      ) : null}
                    </td>
                  )}
                  {row.getVisibleCells().map((cell, ci) => {
                    const c = cell.column.columnDef.meta as Col<T>;
                    const content = flexRender(cell.column.columnDef.cell, cell.getContext());
                    return (
                      <td key={cell.id} className={(c.kind ?? "text") === "text" ? (c.nowrap ? "t-left nowrap" : "t-left name-cell") : "t-right num"}>
                        {getSubRows && ci === 0 ? (
                          <span className="tree-cell" style={{ paddingLeft: row.depth * 16 }}>
                            {row.getCanExpand() ? (
                              <button
                                type="button"
                                className="expander"
                                aria-expanded={row.getIsExpanded()}
                                aria-label={row.getIsExpanded() ? "Collapse" : "Expand"}
                                onClick={(e) => {
                                  e.stopPropagation();
                                  row.toggleExpanded();
                                }}
                              >
                                {row.getIsExpanded() ? "▾" : "▸"}
                              </button>
                            ) : (
                              <span className="expander-spacer" />
                            )}
                            <span>{content}</span>
                          </span>
                        ) : (
                          content
                        )}
                      </td>
                    );
                  })}
                </tr>
                {renderExpanded && row.getIsExpanded() && (
                  <tr className="detail-row">
                    <td colSpan={ncols}><InsideTable.Provider value={true}>{renderExpanded(row.original)}</InsideTable.Provider></td>
                  </tr>
                )}
              </Fragment>
            ))}
            {filteredCount === 0 && (
              <tr>
                <td colSpan={ncols} className="empty-cell">
                  {rows.length === 0 ? emptyText ?? "No rows." : "No rows match the filter."}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      {pageCount > 1 && (
        <div className="pager">
          <button type="button" className="small" onClick={() => table.setPageIndex(0)} disabled={!table.getCanPreviousPage()}>«</button>
          <button type="button" className="small" onClick={() => table.previousPage()} disabled={!table.getCanPreviousPage()}>‹</button>
          <span>
            Page {table.getState().pagination.pageIndex + 1} of {pageCount}
          </span>
          <button type="button" className="small" onClick={() => table.nextPage()} disabled={!table.getCanNextPage()}>›</button>
          <button type="button" className="small" onClick={() => table.setPageIndex(pageCount - 1)} disabled={!table.getCanNextPage()}>»</button>
          <select
            value={table.getState().pagination.pageSize}
            onChange={(e) => table.setPageSize(Number(e.target.value))}
            aria-label="Rows per page"
          >
            {PAGE_SIZES.map((n) => (
              <option key={n} value={n}>{n} / page</option>
            ))}
          </select>
        </div>
      )}
    </div>
  );
}
