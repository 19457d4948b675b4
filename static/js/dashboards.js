// Draws the dashboards' Plotly figures: each `.chart[data-figure]` div names the
// json_script block that holds its figure (built server-side). htmx.onLoad runs for the
// page and for every partial htmx swaps in (each chart has its own URL).
(function () {
  function draw(root) {
    const charts = Array.from(root.querySelectorAll(".chart[data-figure]"));
    if (root.matches && root.matches(".chart[data-figure]")) { charts.push(root); }
    charts.forEach(function (div) {
      const source = document.getElementById(div.dataset.figure);
      if (!source || div.dataset.drawn === "1") { return; }
      const figure = JSON.parse(source.textContent);
      div.dataset.drawn = "1";
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
