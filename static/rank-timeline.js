// Draws the rank timeline from the figure the server built (readings.rank_timeline.rank_timeline_figure).
// plotly (its basic bundle, through page.js's loader) is fetched only on a page that has the
// chart, after the page has loaded and the browser is idle: the page is readable and usable
// before a byte of it arrives. Safe to load twice (htmx re-runs the script when it swaps a new
// verdict in).
(function () {
  if (window.hangdeskTimeline) { window.hangdeskTimeline.schedule(); return; }

  function draw() {
    var target = document.getElementById("rank-timeline");
    var data = document.getElementById("rank-timeline-figure");
    if (!target || !data || target.classList.contains("js-plotly-plot")) return;
    window.hangdeskPlotly(target.dataset.plotlySrc).then(function (Plotly) {
      var figure = JSON.parse(data.textContent);
      var layout = window.hangdeskDarkLayout(figure.layout);
      var fit = window.hangdeskChartFit ? window.hangdeskChartFit(layout, target.clientWidth)
        : { layout: layout, config: {} };
      target.textContent = "";
      Plotly.newPlot(target, figure.data, fit.layout,
        Object.assign({ responsive: true, displaylogo: false }, fit.config));
    }).catch(function () {
      target.textContent = "The chart library did not load; the per-rank table below has the same data.";
    });
  }

  function schedule() {
    if (document.readyState !== "complete") {
      window.addEventListener("load", schedule, { once: true });
      return;
    }
    (window.requestIdleCallback || function (f) { return setTimeout(f, 1); })(draw);
  }

  window.hangdeskTimeline = { schedule: schedule };
  document.addEventListener("htmx:afterSettle", schedule);
  schedule();
})();
