// The guided panel's one control per question: its button says what pressing it records,
// "Confirm" for the evidence's pre-answer, "Override" for any other choice. Delegated from
// the document, so panels swapped in by the live poll need nothing more.
"use strict";
document.addEventListener("change", (event) => {
  const select = event.target;
  if (!(select instanceof HTMLSelectElement) || !select.closest(".guided-form")) return;
  const button = select.form.querySelector("button[data-confirm]");
  const confirming = select.value === select.dataset.suggested;
  button.textContent = confirming ? button.dataset.confirm : button.dataset.override;
});
