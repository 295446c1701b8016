// A plotly figure fitted to a narrow screen (a phone: under 560 px of chart): the legend goes
// below the title instead of beside it (where it covered the title), and the mode bar, which
// sat on both, is left out. The server's figure (readings/rank_timeline.py) is the wide layout.
"use strict";
window.hangdeskChartFit = function (layout, width) {
  if (width >= 560) return { layout: layout, config: {} };
  var fitted = Object.assign({}, layout, {
    title: Object.assign({}, layout.title, {
      font: { size: 12 }, y: 1, yref: "container", yanchor: "top", pad: { t: 6 },
    }),
    margin: Object.assign({}, layout.margin, { l: 44, r: 12, t: 104 }),
    height: (layout.height || 300) + 44,
  });
  if (layout.showlegend !== false) {
    fitted.legend = Object.assign({}, layout.legend, {
      orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom", font: { size: 11 },
    });
  }
  return { layout: fitted, config: { displayModeBar: false } };
};
