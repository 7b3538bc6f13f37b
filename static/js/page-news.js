// A page left open (a flow's, the events list's first) asks every so often whether webhook events arrived after it
// was loaded (portal/news.py), and says so with a button to reload, the count kept up to date. It never reloads by
// itself: the person may be reading, or typing a purpose. Signed out meanwhile, it says so and offers to sign in.
document.addEventListener("DOMContentLoaded", () => {
  const news = document.querySelector(".page-news[data-watch]");
  if (!news) return;
  const said = news.querySelector("[role=status]");
  const EVERY = 15000; // ms between questions while the page is in view
  const LONGEST = 300000; // ms at most between questions while the portal does not answer
  let wait = EVERY;
  let timer;
  let lastAsked = Date.now();
  let asking = false;
  let done = false;
  let button;

  // The sentences in the live region (read out when they change), a button beside it: not in it, so that its name
  // is not read out with them.
  function say(message, label) {
    if (said.textContent !== message) said.textContent = message;
    if (!button) {
      button = document.createElement("button");
      button.type = "button";
      button.className = "btn btn-sm btn-primary";
      button.addEventListener("click", () => window.location.reload());
      news.classList.add("alert", "alert-info", "d-flex", "flex-wrap", "align-items-center", "gap-2", "mb-3");
      news.append(button);
    }
    button.textContent = label;
  }

  // The portal's own words, or the page's when a proxy in front answered with a page of its own.
  async function signedOutMessage(answer) {
    try {
      return (await answer.json()).message || news.dataset.signedOut;
    } catch {
      return news.dataset.signedOut;
    }
  }

  function schedule(after = wait) {
    clearTimeout(timer);
    if (!done) timer = setTimeout(ask, after);
  }

  async function ask() {
    if (done || asking || document.hidden) return; // a hidden page asks again when it is shown
    asking = true;
    lastAsked = Date.now();
    try {
      const answer = await fetch(news.dataset.watch, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (answer.status === 401) {
        done = true; // signed out meanwhile: the reload leads to the sign-in page, and back here
        say(await signedOutMessage(answer), news.dataset.signInLabel);
      } else if (answer.ok) {
        const heard = await answer.json();
        if (heard.new > 0) say(heard.message, news.dataset.reloadLabel); // and asked on: the count grows
        wait = EVERY;
      } else if (answer.status >= 500 || answer.status === 408 || answer.status === 429) {
        wait = Math.min(wait * 2, LONGEST); // busy or away: ask less often until it answers
      } else {
        done = true; // a question the portal will not answer (the page's address is wrong): asked no more
      }
    } catch {
      wait = Math.min(wait * 2, LONGEST); // the portal out of reach: ask less often until it answers
    } finally {
      asking = false;
    }
    schedule();
  }

  // Shown again: asked at once if the wait is over (a hidden page skipped its turn), else when it is.
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !done) schedule(Math.max(0, wait - (Date.now() - lastAsked)));
  });
  schedule();
});
