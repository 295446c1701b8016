// The evidence viewer: go to the quoted line, search within the file (Enter for the next match).
(function () {
  var viewer = document.querySelector(".viewer");
  if (!viewer) return;
  var rows = Array.prototype.slice.call(viewer.querySelectorAll("tr"));
  var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
  if (!target && viewer.dataset.line) target = document.getElementById("L" + viewer.dataset.line);
  if (target) {
    target.classList.add("target");
    target.scrollIntoView({ block: "center" });
  }
  var input = document.getElementById("viewer-search");
  var count = document.getElementById("viewer-count");
  var matches = [], at = -1, timer = null;

  function search() {
    var needle = input.value.toLowerCase();
    matches.forEach(function (row) { row.classList.remove("match", "current"); });
    matches = [];
    at = -1;
    if (needle.length < 2) { count.textContent = ""; return; }
    rows.forEach(function (row) {
      var cell = row.cells[1];
      if (cell && cell.textContent.toLowerCase().indexOf(needle) !== -1) {
        row.classList.add("match");
        matches.push(row);
      }
    });
    count.textContent = matches.length ? matches.length + " matching lines" : "no match";
    next();
  }

  function next() {
    if (!matches.length) return;
    if (at >= 0) matches[at].classList.remove("current");
    at = (at + 1) % matches.length;
    matches[at].classList.add("current");
    matches[at].scrollIntoView({ block: "center" });
    count.textContent = (at + 1) + " of " + matches.length + " matching lines";
  }

  input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(search, 150); });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter") { event.preventDefault(); next(); }
  });
})();
