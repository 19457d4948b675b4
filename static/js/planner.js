// Draws the window planner's plans as Plotly heatmaps (data from json_script blocks).
document.querySelectorAll(".heatmap").forEach(function (div) {
  const data = JSON.parse(document.getElementById(div.dataset.mode).textContent);
  Plotly.newPlot(div, [{
    type: "heatmap", z: data.z, x: data.x, y: data.y, text: data.hover, hoverinfo: "text",
    colorscale: data.colorscale, zmin: data.zmin, zmax: data.zmax, showscale: false, xgap: 1, ygap: 1,
  }], {
    margin: {l: 10, r: 10, t: 10, b: 10}, height: Math.max(220, 14 * data.y.length + 80),
    font: {size: 12},
    xaxis: {title: {text: data.step_title, standoff: 8}, automargin: true},
    yaxis: {title: {text: "GPU", standoff: 8}, autorange: "reversed", automargin: true},
  }, {displaylogo: false, responsive: true});
});
