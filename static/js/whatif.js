// Draws what-if preview charts (data from json_script blocks) once htmx has swapped them in.
// Horizontal bars, one row per project (its path on the axis, shortened from the left at a
// "/" when long: the server's labels, dashboards.charts.short_label and leaf_label): delivered GPU-hours with the current (grey) and proposed (blue) weights; a tick
// on each bar marks what that tree entitles the project to.
// Plotly (4.8 MB) is only fetched once a result is on the page.
let plotlyRequested = false;
function loadPlotly() {
  const holder = document.getElementById("whatif");
  if (plotlyRequested || !holder) return;
  plotlyRequested = true;
  const script = document.createElement("script");
  script.src = holder.dataset.plotly;
  script.addEventListener("load", drawWhatif);
  document.head.appendChild(script);
}
const NARROW_PX = 560;  // on a phone: a project's own name only, and a shorter title
function drawWhatif() {
  if (!document.querySelector(".whatif-chart:not([data-drawn])")) return;
  if (typeof Plotly === "undefined") { loadPlotly(); return; }
  document.querySelectorAll(".whatif-chart:not([data-drawn])").forEach(function (div) {
    const source = document.getElementById(div.dataset.source);
    if (!source) return;
    const d = JSON.parse(source.textContent);
    div.dataset.drawn = "1";
    const at = function (shift) { return d.projects.map(function (_, i) { return i + shift; }); };
    const narrow = div.clientWidth < NARROW_PX;
    const labels = narrow ? d.narrow_labels : d.labels;
    const xTitle = narrow ? "GPU-hours (allocated)"
      : "GPU-hours (allocated) over the " + d.days + " replayed days";
    const hover = "%{customdata}: %{x:,.0f} GPU-h<extra>%{fullData.name}</extra>";
    const bar = function (name, y, x, color) {
      return {type: "bar", orientation: "h", name: name, y: y, x: x, width: 0.38,
              marker: {color: color}, customdata: d.projects, hovertemplate: hover};
    };
    const tick = function (name, y, x, color) {
      return {type: "scatter", mode: "markers", name: name, y: y, x: x, customdata: d.projects,
              hovertemplate: hover,
              marker: {symbol: "line-ns-open", size: 18, color: color, line: {width: 3, color: color}}};
    };
    Plotly.newPlot(div, [
      bar("Delivered, replay with today's weights", at(-0.2), d.before, "#a0aec0"),
      bar("Delivered, replay with proposed weights", at(0.2), d.after, "#2b6cb0"),
      tick("Delivered, recorded", at(-0.2), d.recorded, "#2f855a"),
      tick("Demand-capped entitlement, replay with today's weights", at(-0.2),
           d.entitled_before, "#4a5568"),
      tick("Demand-capped entitlement, replay with proposed weights", at(0.2),
           d.entitled_after, "#dd6b20"),
    ], {
      barmode: "overlay", height: Math.max(260, 110 + 46 * d.projects.length),
      margin: {l: 10, r: 10, t: 10, b: 10}, font: {size: 12},
      yaxis: {tickvals: at(0), ticktext: labels, autorange: "reversed",
              automargin: true, title: {text: "Project", standoff: 8}},
      xaxis: {automargin: true, rangemode: "tozero",
              title: {text: xTitle, standoff: 8}},
      legend: {orientation: "h", x: 0, y: 1.02, yanchor: "bottom"},
    }, {displaylogo: false, responsive: true});
  });
}
document.addEventListener("htmx:afterSettle", drawWhatif);
window.addEventListener("load", drawWhatif);
