// Draws the watch's step-progress chart from the figure the server built
// (watch.figures.step_progress_figure). plotly's basic bundle (page.js's loader) is fetched
// only where the chart is; redrawn each time htmx swaps a fresh panel in.
(function () {
  if (window.hangdeskWatchChart) { window.hangdeskWatchChart.draw(); return; }

  function draw() {
    var target = document.getElementById("watch-step-chart");
    var data = document.getElementById("watch-step-figure");
    if (!target || !data) return;
    window.hangdeskPlotly(target.dataset.plotlySrc).then(function (Plotly) {
      var figure = JSON.parse(data.textContent);
      target.textContent = "";
      Plotly.react(target, figure.data, window.hangdeskDarkLayout(figure.layout),
        { responsive: true, displaylogo: false });
    }).catch(function () {
      target.textContent = "The chart library did not load; the figures above have the same data.";
    });
  }

  window.hangdeskWatchChart = { draw: draw };
  document.addEventListener("htmx:afterSettle", draw);
  draw();
})();
