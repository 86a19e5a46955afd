// The cohort report's sortable tables (autograder/report/site.py copies this file beside index.html).
//
// A header cell with data-sort="number" or data-sort="text" gets a button; a click sorts the table's rows
// by that column, ascending first, then the other way at each further click. A cell's sort key is its
// data-value where it has one (a score's points, where the cell reads "12 / 18"), else its text. Cells
// with no key ("-", empty: not graded) stay last both ways, and equal keys keep their order.
//
// Rows are moved, never rewritten: names and messages in them come from students, and nothing here
// reads or writes HTML as text.
"use strict";

(function () {
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  function key(cell, numeric) {
    if (!cell) {
      return null;
    }
    const raw = (cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent).trim();
    if (raw === "" || raw === "-") {
      return null;
    }
    if (!numeric) {
      return raw;
    }
    const value = Number.parseFloat(raw);
    return Number.isNaN(value) ? null : value;
  }

  function compare(a, b, numeric, direction) {
    if (a.key === null || b.key === null) {
      return (a.key === null) - (b.key === null) || a.position - b.position;
    }
    const order = numeric ? a.key - b.key : collator.compare(a.key, b.key);
    return direction * order || a.position - b.position;
  }

  function sort(header) {
    const table = header.closest("table");
    const numeric = header.dataset.sort === "number";
    const direction = header.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    for (const other of table.querySelectorAll("thead th[aria-sort]")) {
      other.removeAttribute("aria-sort");
    }
    header.setAttribute("aria-sort", direction === 1 ? "ascending" : "descending");
    const column = header.cellIndex;
    for (const body of table.tBodies) {
      const rows = Array.from(body.rows, (row, position) => ({ row, position, key: key(row.cells[column], numeric) }));
      rows.sort((a, b) => compare(a, b, numeric, direction));
      for (const { row } of rows) {
        body.appendChild(row);
      }
    }
  }

  function sortable(header) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.title = "sort by this column";
    while (header.firstChild) {
      button.appendChild(header.firstChild);
    }
    header.appendChild(button);
    button.addEventListener("click", () => sort(header));
  }

  document.querySelectorAll("table.sortable thead th[data-sort]").forEach(sortable);
})();
