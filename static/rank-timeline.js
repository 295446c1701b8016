// Draws the rank timeline from the figure the server built (analysis.timeline_figure).
(function () {
  var data = document.getElementById("rank-timeline-figure");
  var target = document.getElementById("rank-timeline");
  if (!data || !target || !window.Plotly) return;
  var figure = JSON.parse(data.textContent);
  var layout = Object.assign({}, figure.layout, {
    paper_bgcolor: "#181e24", plot_bgcolor: "#101418", font: { color: "#e6edf3" },
  });
  window.Plotly.newPlot(target, figure.data, layout, { responsive: true, displaylogo: false });
})();
