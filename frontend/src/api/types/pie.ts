// A slice of the pie routes' replies (operation, kernel, kernel/tc_pie).

export interface PieSlice {
  name: string;
  value_ns: number;
}
