// Draws the watch's step-progress chart from the figure the server built
// (watch.figures.step_progress_figure). plotly's basic bundle is fetched only where the chart
// is; redrawn each time htmx swaps a fresh panel in.
(function () {
  if (window.hangdeskWatchChart) { window.hangdeskWatchChart.draw(); return; }
  var loading = null;

  function plotly(src) {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = src;
        script.async = true;
        script.onload = function () { resolve(window.Plotly); };
        script.onerror = function () { loading = null; reject(new Error("plotly did not load")); };
        document.head.appendChild(script);
      });
    }
    return loading;
  }

  function draw() {
    var target = document.getElementById("watch-step-chart");
    var data = document.getElementById("watch-step-figure");
    if (!target || !data) return;
    plotly(target.dataset.plotlySrc).then(function (Plotly) {
      var figure = JSON.parse(data.textContent);
      var layout = Object.assign({}, figure.layout, {
        paper_bgcolor: "#181e24", plot_bgcolor: "#101418", font: { color: "#e6edf3" },
      });
      target.textContent = "";
      Plotly.react(target, figure.data, layout, { responsive: true, displaylogo: false });
    }).catch(function () {
      target.textContent = "The chart library did not load; the figures above have the same data.";
    });
  }

  window.hangdeskWatchChart = { draw: draw };
  document.addEventListener("htmx:afterSettle", draw);
  draw();
})();
