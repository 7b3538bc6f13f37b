// Small progressive enhancements; every page works without them.
document.documentElement.classList.add("js");

document.addEventListener("DOMContentLoaded", () => {
  // Page-size and language selects apply a choice made with the pointer at once. Arrow keys, Home, End and typing
  // fire a change at every step, so a change from the keyboard shows the form's own button instead; Enter applies.
  for (const select of document.querySelectorAll("select.auto-submit")) {
    let fromKeyboard = false;
    select.addEventListener("pointerdown", () => {
      fromKeyboard = false;
    });
    select.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        select.form.requestSubmit();
      } else {
        fromKeyboard = true;
      }
    });
    select.addEventListener("change", () => {
      if (!fromKeyboard) {
        select.form.requestSubmit();
        return;
      }
      fromKeyboard = false;
      for (const button of select.form.querySelectorAll(".js-hide")) button.classList.remove("js-hide");
    });
  }
  // The main menu on phones: folded behind its button (CSS shows it whole, and hides the button, on wider screens).
  const toggle = document.querySelector(".nav-toggle");
  const menu = toggle && document.getElementById(toggle.getAttribute("aria-controls"));
  if (menu) {
    const setOpen = (open) => {
      toggle.setAttribute("aria-expanded", String(open));
      menu.classList.toggle("show", open);
    };
    menu.classList.add("collapse");
    setOpen(false);
    toggle.hidden = false;
    toggle.addEventListener("click", () => setOpen(toggle.getAttribute("aria-expanded") !== "true"));
    menu.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && toggle.getAttribute("aria-expanded") === "true" && toggle.offsetParent) {
        setOpen(false);
        toggle.focus();
      }
    });
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
