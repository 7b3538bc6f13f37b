// A page left open (a flow's, the events list's first) asks every so often whether webhook events arrived after it
// was loaded (portal/news.py), and says so with a button to reload. It never reloads by itself: the person may be
// reading, or typing a purpose.
document.addEventListener("DOMContentLoaded", () => {
  const news = document.querySelector(".page-news[data-watch]");
  if (!news) return;
  const EVERY = 15000; // ms between questions while the page is in view
  const LONGEST = 300000; // ms at most between questions while the portal does not answer
  let wait = EVERY;
  let timer;
  let asking = false;
  let done = false;

  function say(message) {
    done = true;
    const text = document.createElement("p");
    text.className = "mb-0 me-auto";
    text.textContent = message;
    const reload = document.createElement("button");
    reload.type = "button";
    reload.className = "btn btn-sm btn-primary";
    reload.textContent = news.dataset.reloadLabel;
    reload.addEventListener("click", () => window.location.reload());
    news.classList.add("alert", "alert-info", "d-flex", "flex-wrap", "align-items-center", "gap-2");
    news.replaceChildren(text, reload);
  }

  function schedule() {
    clearTimeout(timer);
    if (!done) timer = setTimeout(ask, wait);
  }

  async function ask() {
    if (done || asking || document.hidden) return; // a hidden page asks again when it is shown
    asking = true;
    try {
      const answer = await fetch(news.dataset.watch, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (answer.status === 401) {
        say((await answer.json()).message); // signed out meanwhile: the reload leads to the sign-in page
      } else if (answer.ok) {
        const heard = await answer.json();
        if (heard.new > 0) say(heard.message);
        wait = EVERY;
      } else if (answer.status < 500) {
        done = true; // a question the portal will not answer (the page's address is wrong): asked no more
      } else {
        wait = Math.min(wait * 2, LONGEST);
      }
    } catch {
      wait = Math.min(wait * 2, LONGEST); // the portal out of reach: ask less often until it answers
    } finally {
      asking = false;
    }
    schedule();
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) ask();
  });
  schedule();
});
