// What every console page shares (templates/base.html), in a file of its own: the pages run
// no inline script. Loaded in <head> without defer, so a page never shows unfolded first.
"use strict";
document.documentElement.classList.add("js");

// A form that asks first (data-confirm-submit="Remove node ...?"): no answer, no submit.
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute && event.target.getAttribute("data-confirm-submit");
  if (question && !window.confirm(question)) event.preventDefault();
}, true);

// Menus that fold on a small screen (static/hangdesk.css, "Small screens"): the site's header
// and the incident's actions. A toggle names its menu by aria-controls; the menu opens with
// the class "menu-open". Without this script nothing folds, so every action stays in reach.
(function () {
  function sync(menu) {
    var open = menu.classList.contains("menu-open");
    document.querySelectorAll('[aria-controls="' + menu.id + '"]').forEach(function (toggle) {
      toggle.setAttribute("aria-expanded", String(open));
    });
  }

  function setOpen(menu, open) {
    menu.classList.toggle("menu-open", open);
    sync(menu);
  }

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-menu-toggle]");
    if (!toggle) return;
    var menu = document.getElementById(toggle.getAttribute("aria-controls"));
    if (menu) setOpen(menu, !menu.classList.contains("menu-open"));
  });

  // An action taken from an open menu closes it, so its answer (below the header) shows.
  document.addEventListener("submit", function (event) {
    var menu = event.target.closest(".menu-open");
    if (menu) setOpen(menu, false);
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    document.querySelectorAll(".menu-open").forEach(function (menu) { setOpen(menu, false); });
  });

  // The live poll swaps the incident's head (with its toggle) in: keep the toggle truthful.
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("[data-menu]").forEach(sync);
  });

  // Anchor jumps land below a sticky head (hangdesk.css: scroll-padding-top): its height,
  // measured, replaces the stylesheet's estimate; an anchor the page opened at is re-aimed.
  function measureSticky() {
    var head = document.querySelector(".incident-top");
    if (!head) return;
    var root = document.documentElement;
    var fit = function () {
      var open = head.classList.contains("menu-open");
      // An open menu is the responder's own doing: it does not move the anchors.
      if (!open) root.style.setProperty("--sticky-top", head.offsetHeight + "px");
    };
    fit();
    if (window.ResizeObserver) new ResizeObserver(fit).observe(head);
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", measureSticky);
  } else {
    measureSticky();
  }
})();

// The one plotly loader of the console's charts (the rank timeline, the watch's step chart):
// its basic bundle is fetched on the first call, once, by whichever chart asks first; a page
// without a chart never downloads it. A failed fetch may be tried again by the next call.
window.hangdeskPlotly = (function () {
  var loading = null;
  return function (src) {
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
  };
})();

// A server-built figure's layout in the console's dark colours.
window.hangdeskDarkLayout = function (layout) {
  return Object.assign({}, layout, {
    paper_bgcolor: "#181e24", plot_bgcolor: "#101418", font: { color: "#e6edf3" },
  });
};
