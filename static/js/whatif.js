// Draws what-if preview charts (data from json_script blocks) once htmx has swapped them in.
// Bars: delivered GPU-hours per project with the current (grey) and proposed (blue) weights;
// a tick over each bar marks what that tree entitles the project to.
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
function drawWhatif() {
  if (!document.querySelector(".whatif-chart:not([data-drawn])")) return;
  if (typeof Plotly === "undefined") { loadPlotly(); return; }
  document.querySelectorAll(".whatif-chart:not([data-drawn])").forEach(function (div) {
    const source = document.getElementById(div.dataset.source);
    if (!source) return;
    const d = JSON.parse(source.textContent);
    div.dataset.drawn = "1";
    const at = function (shift) { return d.projects.map(function (_, i) { return i + shift; }); };
    const bar = function (name, x, y, color) {
      return {type: "bar", name: name, x: x, y: y, width: 0.38, marker: {color: color}};
    };
    const tick = function (name, x, y, color) {
      return {type: "scatter", mode: "markers", name: name, x: x, y: y,
              marker: {symbol: "line-ew-open", size: 26, color: color, line: {width: 3, color: color}}};
    };
    Plotly.newPlot(div, [
      bar("delivered, current weights", at(-0.2), d.before, "#a0aec0"),
      bar("delivered, proposed weights", at(0.2), d.after, "#2b6cb0"),
      tick("entitled, current", at(-0.2), d.entitled_before, "#4a5568"),
      tick("entitled, proposed", at(0.2), d.entitled_after, "#dd6b20"),
    ], {
      barmode: "overlay", height: 360, margin: {l: 60, r: 10, t: 10, b: 90},
      xaxis: {tickvals: at(0), ticktext: d.projects},
      yaxis: {title: "GPU-hours (allocated)"}, legend: {orientation: "h", y: -0.3},
    }, {displaylogo: false, responsive: true});
  });
}
document.addEventListener("htmx:afterSettle", drawWhatif);
window.addEventListener("load", drawWhatif);
