// Draws the dashboards' Plotly figures: each `.chart[data-figure]` div names the
// json_script block that holds its figure (built server-side). htmx.onLoad runs for the
// page (which holds every chart) and for every partial htmx swaps in (a table's pager
// loads its section again from the chart's own URL).
(function () {
  const NARROW_PX = 560;
  // A figure may carry layout.meta.narrow: {"yaxis.ticktext": [...], ...}, what it shows
  // instead when drawn narrower than NARROW_PX (a phone): shorter labels and titles.
  function narrow(div, layout) {
    const changes = layout.meta && layout.meta.narrow;
    if (!changes || div.clientWidth >= NARROW_PX) { return; }
    Object.keys(changes).forEach(function (path) {
      const keys = path.split(".");
      let node = layout;
      keys.slice(0, -1).forEach(function (k) { node = node[k] = node[k] || {}; });
      node[keys[keys.length - 1]] = changes[path];
    });
  }
  function draw(root) {
    const charts = Array.from(root.querySelectorAll(".chart[data-figure]"));
    if (root.matches && root.matches(".chart[data-figure]")) { charts.push(root); }
    charts.forEach(function (div) {
      const source = document.getElementById(div.dataset.figure);
      if (!source || div.dataset.drawn === "1") { return; }
      const figure = JSON.parse(source.textContent);
      div.dataset.drawn = "1";
      narrow(div, figure.layout || {});
      Plotly.newPlot(div, figure.data || [], figure.layout || {},
        {displaylogo: false, responsive: true});
    });
  }
  if (window.htmx) {
    htmx.onLoad(draw);
  } else {
    document.addEventListener("DOMContentLoaded", function () { draw(document); });
  }
})();
