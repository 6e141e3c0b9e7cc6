/** Virtual scrolling maths for fixed-height rows. */

export interface RowWindow {
  /** First row to draw. */
  first: number;
  /** One past the last row to draw. */
  last: number;
}

/** The rows intersecting the viewport, plus `overscan` rows either side, clamped to [0, total). */
export function rowWindow(
  scrollTop: number,
  viewportHeight: number,
  rowHeight: number,
  total: number,
  overscan: number
): RowWindow {
  if (total <= 0 || rowHeight <= 0) {
    return { first: 0, last: 0 };
  }
  const top = Math.max(0, scrollTop);
  const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
  const last = Math.min(
    total,
    Math.ceil((top + Math.max(0, viewportHeight)) / rowHeight) + overscan
  );
  return { first: Math.min(first, total), last: Math.max(last, Math.min(first, total)) };
}

/** The scrollTop that brings `row` fully into view, moving as little as possible. */
export function scrollToShow(
  row: number,
  scrollTop: number,
  viewportHeight: number,
  rowHeight: number
): number {
  const top = row * rowHeight;
  const bottom = top + rowHeight;
  if (top < scrollTop) {
    return top;
  }
  if (bottom > scrollTop + viewportHeight) {
    return Math.max(0, bottom - viewportHeight);
  }
  return scrollTop;
}

/** A bar's left offset and width, as fractions of the trace's time range (min width 0.2%). */
export function barGeometry(
  start: number,
  end: number,
  rangeStart: number,
  rangeEnd: number
): { left: number; width: number } {
  const span = rangeEnd - rangeStart;
  if (!(span > 0)) {
    return { left: 0, width: 1 };
  }
  const left = Math.min(1, Math.max(0, (start - rangeStart) / span));
  const width = Math.max(0.002, Math.min(1 - left, (end - start) / span));
  return { left, width };
}
