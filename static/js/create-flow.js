// The create form, as the person types: preselect the country the number's shape says and show the birth
// date it reads; in a test environment, fill in a synthetic identity at a click. The server checks it all.

// The birth date as the page's language writes it, as the server does (English pages: day month year).
const BORN_FORMAT = new Intl.DateTimeFormat(
  document.documentElement.lang === "en" ? "en-GB" : document.documentElement.lang,
  { dateStyle: "medium", timeZone: "UTC" },
);

document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("national_id");
  const country = document.getElementById("country");
  const reading = document.getElementById("national-id-reading");
  if (!input || !country || !reading) return;

  const SHAPES = [
    ["no", /^(\d{2})(\d{2})(\d{2}) ?(\d{3})\d{2}$/],
    ["se", /^(\d{2})?(\d{2})(\d{2})(\d{2})([-+]?)\d{4}$/],
    ["fi", /^(\d{2})(\d{2})(\d{2})([-+A-FU-Y])(\d{3})[0-9A-Y]$/i],
  ];

  function norwegianYear(yy, individual) {
    if (individual < 500) return 1900 + yy;
    if (individual < 750 && yy >= 54) return 1800 + yy;
    if (yy < 40) return 2000 + yy;
    return individual >= 900 ? 1900 + yy : null;
  }

  function read(value) {
    for (const [code, shape] of SHAPES) {
      const m = value.trim().match(shape);
      if (!m) continue;
      let year, month, day;
      if (code === "no") {
        day = +m[1] % 40; // D-numbers: day + 40
        month = +m[2] > 80 ? +m[2] - 80 : +m[2] % 40; // Tenor test numbers: month + 80
        year = norwegianYear(+m[3], +m[4]);
      } else if (code === "se") {
        const now = new Date().getFullYear();
        year = m[1] ? +(m[1] + m[2]) : 2000 + +m[2] > now ? 1900 + +m[2] : 2000 + +m[2];
        if (!m[1] && m[5] === "+") year -= 100;
        month = +m[3];
        day = +m[4] > 60 ? +m[4] - 60 : +m[4]; // samordningsnummer: day + 60
      } else {
        const sign = m[4].toUpperCase();
        year = (sign === "+" ? 1800 : "ABCDEF".includes(sign) ? 2000 : 1900) + +m[3];
        month = +m[2];
        day = +m[1];
      }
      const born = year && new Date(Date.UTC(year, month - 1, day));
      const valid = born && born.getUTCMonth() === month - 1 && born.getUTCDate() === day;
      return { code, born: valid ? BORN_FORMAT.format(born) : null };
    }
    return null;
  }

  // A country the person chose stays chosen: a number of another country's shape is said, never switched to.
  let chosenByPerson = false;

  function update() {
    const found = read(input.value);
    const option = found && country.querySelector(`option[value="${found.code}"]`);
    if (option && !chosenByPerson) country.value = found.code;
    const otherCountry = Boolean(option) && country.value !== found.code;
    const parts = [];
    if (otherCountry) parts.push(reading.dataset.otherCountry.replace("%(country)s", option.textContent));
    else if (option) parts.push(`${reading.dataset.countryLabel}: ${option.textContent}`);
    if (found && found.born) parts.push(`${reading.dataset.bornLabel} ${found.born}`);
    reading.textContent = parts.join(" · "); // a live region stays in place, empty or not, to be read out
    reading.classList.toggle("text-warning-emphasis", otherCountry);
  }

  input.addEventListener("input", update);
  country.addEventListener("change", () => {
    chosenByPerson = true;
    update();
  });
  for (const button of document.querySelectorAll("button[data-synthetic-id]")) {
    button.disabled = false;
    button.addEventListener("click", () => {
      input.value = button.dataset.syntheticId;
      country.value = button.dataset.country;
      update();
      input.focus();
    });
  }
});
