// Draws a post-mortem document's rank timeline (sharing/documents.py) on a light page.
(function () {
  var data = document.getElementById("document-figure");
  var target = document.getElementById("document-chart");
  if (!data || !target || !window.Plotly) return;
  var figure = JSON.parse(data.textContent);
  var dark = !document.body.classList.contains("paper");
  var layout = Object.assign({}, figure.layout, dark
    ? { paper_bgcolor: "#181e24", plot_bgcolor: "#101418", font: { color: "#e6edf3" } }
    : { paper_bgcolor: "#ffffff", plot_bgcolor: "#f6f8fa", font: { color: "#1f2328" } });
  var fit = window.hangdeskChartFit ? window.hangdeskChartFit(layout, target.clientWidth)
    : { layout: layout, config: {} };
  window.Plotly.newPlot(target, figure.data, fit.layout, Object.assign({
    responsive: true, displaylogo: false, staticPlot: !dark,
  }, fit.config));
})();
