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
