// The incident page's small behaviours, delegated from the document so that regions the live
// poll swaps in need nothing more.
"use strict";

// The guided panel's one control per question: its button says what pressing it records,
// "Confirm" for the evidence's pre-answer, "Override" for any other choice.
document.addEventListener("change", function (event) {
  var select = event.target;
  if (!(select instanceof HTMLSelectElement) || !select.closest(".guided-form")) return;
  var button = select.form.querySelector("button[data-confirm]");
  var confirming = select.value === select.dataset.suggested;
  button.textContent = confirming ? button.dataset.confirm : button.dataset.override;
});

// "Snapshot 3 started." is true until snapshot 3 is done: then it says so, without green.
document.addEventListener("htmx:afterSettle", function () {
  document.querySelectorAll(".flash[data-about]").forEach(function (flash) {
    var about = flash.dataset.about;
    var progress = document.querySelector('.progress-panel[data-about="' + about + '"]');
    if (!progress || progress.dataset.active !== "false") return;
    flash.className = "flash info retired";
    flash.textContent = about.replace("snapshot-", "Snapshot ") + " " +
      (progress.dataset.status === "failed" ? "failed: see the evidence panel." : "is done: its verdict is below.");
    flash.removeAttribute("data-about");
  });
});

// A form marked data-reset-on-success (the note form) empties itself once htmx says its
// request went through: no inline handler, the console's CSP runs no inline script.
document.addEventListener("htmx:afterRequest", function (event) {
  var form = event.target.closest && event.target.closest("form[data-reset-on-success]");
  if (form && event.detail.successful) form.reset();
});

// A poller marked data-visible-only (the live poll) asks nothing while its tab is hidden. The
// condition lives here, not in an hx-trigger filter: htmx runs those as code (eval), which
// the console's CSP forbids.
document.addEventListener("htmx:beforeRequest", function (event) {
  var from = event.detail && event.detail.elt;
  var gated = from && from.hasAttribute && from.hasAttribute("data-visible-only");
  if (gated && document.visibilityState !== "visible") event.preventDefault();
});
