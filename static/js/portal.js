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
  // The administration entries (a <details>, which opens and closes by itself): closed again by a click elsewhere,
  // by the focus leaving them (Tab past the last), or by Escape, which returns to its summary, as a menu does.
  const adminEntries = document.querySelector("details.admin-entries");
  if (adminEntries) {
    document.addEventListener("click", (event) => {
      if (adminEntries.open && !adminEntries.contains(event.target)) adminEntries.open = false;
    });
    adminEntries.addEventListener("focusout", (event) => {
      if (adminEntries.open && !adminEntries.contains(event.relatedTarget)) adminEntries.open = false;
    });
    adminEntries.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && adminEntries.open) {
        event.stopPropagation(); // the folded main menu stays open
        adminEntries.open = false;
        adminEntries.querySelector("summary").focus();
      }
    });
  }
  // Copy buttons beside shortened flow ids: the whole id to the clipboard, else selected for Ctrl+C.
  const copyButtons = document.querySelectorAll("button[data-copy]");
  if (copyButtons.length) {
    const live = document.createElement("div");
    live.className = "visually-hidden";
    live.setAttribute("role", "status");
    live.setAttribute("aria-live", "polite");
    live.dataset.testid = "copy-status";
    document.body.append(live);
    const selectText = (button) => {
      const range = document.createRange();
      range.selectNodeContents(button.closest(".flow-id").querySelector("code"));
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      try {
        return document.execCommand("copy");
      } catch {
        return false;
      }
    };
    for (const button of copyButtons) {
      const label = button.querySelector(".copy-label");
      const idle = label.textContent;
      let restore;
      button.hidden = false;
      button.addEventListener("click", async () => {
        let copied;
        try {
          await navigator.clipboard.writeText(button.dataset.copy);
          copied = true;
        } catch {
          copied = selectText(button);
        }
        if (!copied) return;
        // Emptied first, so a second copy is announced again.
        live.textContent = "";
        setTimeout(() => {
          live.textContent = button.dataset.copied;
        }, 50);
        label.textContent = button.dataset.copied;
        clearTimeout(restore);
        restore = setTimeout(() => {
          label.textContent = idle;
        }, 2000);
      });
    }
  }
  // A form sent back with errors: the focus goes to its first invalid field, so a screen reader reads the field's
  // label and, through aria-describedby, its error; a sighted keyboard user starts where the fix is.
  const firstInvalid = document.querySelector("form [aria-invalid='true']");
  if (firstInvalid) firstInvalid.focus();
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
