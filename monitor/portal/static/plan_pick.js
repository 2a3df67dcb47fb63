// The complaint page's site plan, scaled to its box. Without JavaScript the plan is drawn
// PICK_WIDTH_PX wide (complaint_pages.py) and the server maps the click's pixels by that width.
// With it, the plan fills its box (the class "scaled") and each click first writes the width it
// is drawn at into the form's pick_width, so the server maps the pixels by the width clicked.
"use strict";
(function () {
  const fieldset = document.getElementById("plan-pick");
  const width = document.getElementById("pick-width");
  if (!fieldset || !width) return;
  fieldset.classList.add("scaled");
  for (const image of fieldset.querySelectorAll("input.plan-image")) {
    image.addEventListener("click", function () {
      width.value = String(image.getBoundingClientRect().width);
    });
  }
})();
