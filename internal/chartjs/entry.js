// The admin console's overview charts: Chart.js (npm, pinned in
// package-lock.json) with only the parts the charts use, bundled by
// build.mjs into chart.js. Each canvas[data-chart] is drawn from the
// table of its section, which stays on the page with the figures: the
// charts need script, the tables do not.
import { Chart, BarController, BarElement, LineController, LineElement, PointElement, CategoryScale, LinearScale, Legend, Tooltip } from "chart.js";

Chart.register(BarController, BarElement, LineController, LineElement, PointElement, CategoryScale, LinearScale, Legend, Tooltip);

const colours = ["#0f6cbd", "#c50f1f", "#8a8886", "#107c10", "#5c2e91", "#ca5010"];

function read(table) {
  const heads = [...table.tHead.rows[0].cells].map((c) => c.textContent.trim());
  const rows = [...table.tBodies[0].rows].filter((r) => r.cells.length === heads.length);
  const labels = rows.map((r) => r.cells[0].textContent.trim());
  const columns = heads.slice(1).map((h, i) => ({ label: h, data: rows.map((r) => Number(r.cells[i + 1].textContent)) }))
    .filter((c) => c.data.every((n) => !Number.isNaN(n)));
  return { labels, columns };
}

for (const canvas of document.querySelectorAll("canvas[data-chart]")) {
  const table = canvas.parentElement.querySelector("table");
  if (!table) continue;
  const { labels, columns } = read(table);
  if (labels.length === 0) continue;
  const kind = canvas.dataset.chart;
  const byDay = kind === "activity" || kind === "calls";
  const datasets = columns.map((c, i) => ({
    label: c.label, data: c.data, borderColor: colours[i % colours.length], backgroundColor: colours[i % colours.length],
    stack: kind === "calls" ? "calls" : undefined, tension: 0.2, pointRadius: 2,
  }));
  canvas.hidden = false;
  new Chart(canvas, {
    type: kind === "activity" ? "line" : "bar",
    data: { labels, datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      indexAxis: byDay ? "x" : "y",
      scales: { x: { stacked: kind === "calls", beginAtZero: true }, y: { stacked: kind === "calls", beginAtZero: true } },
      plugins: { legend: { display: datasets.length > 1 } },
    },
  });
}
