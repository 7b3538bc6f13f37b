// Small progressive enhancements; every page works without them.
document.documentElement.classList.add("js");

document.addEventListener("DOMContentLoaded", () => {
  // Page-size select: apply on change instead of needing the Show button.
  for (const select of document.querySelectorAll("select.auto-submit")) {
    select.addEventListener("change", () => select.form.requestSubmit());
  }
  // A form with a data-once button is sent once: a double click does not send it twice.
  for (const button of document.querySelectorAll("button[data-once]")) {
    button.form.addEventListener("submit", (event) => {
      if (button.form.dataset.sent) {
        event.preventDefault();
        return;
      }
      button.form.dataset.sent = "1";
      button.setAttribute("aria-disabled", "true");
      button.classList.add("disabled");
    });
  }
});
