// The create form, as the person types: preselect the country the number's shape says and show the birth
// date it reads, or what in it cannot be right; in a test environment, fill in a synthetic identity
// at a click. The server checks it all.

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
    ["se", /^(\d{2})?(\d{2})(\d{2})(\d{2})([-+ ]?)\d{4}$/],
    ["fi", /^(\d{2})(\d{2})(\d{2})([-+A-FU-Y])(\d{3})[0-9A-Y]$/i],
  ];

  // Check digits as python-stdnum checks them on the server: Norway's two mod 11 digits (a remainder of 10 is
  // no digit), Sweden's Luhn digit over the ten-digit form, Finland's mod 31 character.
  function mod11(digits, weights) {
    const sum = weights.reduce((total, weight, i) => total + weight * +digits[i], 0);
    return (11 - (sum % 11)) % 11;
  }

  const CHECKS = {
    no(number) {
      const digits = number.replace(" ", "");
      const first = mod11(digits, [3, 7, 6, 1, 8, 9, 4, 5, 2]);
      const second = mod11(digits, [5, 4, 3, 2, 7, 6, 5, 4, 3, 2]);
      return first < 10 && second < 10 && digits.endsWith(`${first}${second}`);
    },
    se(number) {
      const digits = number.replace(/[-+ ]/, "").slice(-10);
      const sum = [...digits].reduce((total, digit, i) => {
        const doubled = +digit * (i % 2 === 0 ? 2 : 1);
        return total + (doubled > 9 ? doubled - 9 : doubled);
      }, 0);
      return sum % 10 === 0;
    },
    fi(number) {
      const remainder = +(number.slice(0, 6) + number.slice(7, 10)) % 31;
      return "0123456789ABCDEFHJKLMNPRSTUVWXY"[remainder] === number[10].toUpperCase();
    },
  };

  function norwegianYear(yy, individual) {
    if (individual < 500) return 1900 + yy;
    if (individual < 750 && yy >= 54) return 1800 + yy;
    if (yy < 40) return 2000 + yy;
    return individual >= 900 ? 1900 + yy : null;
  }

  function bornOf(code, m) {
    let year, month, day;
    if (code === "no") {
      day = +m[1] % 40; // D-numbers: day + 40
      month = +m[2] > 80 ? +m[2] - 80 : +m[2] % 40; // Tenor test numbers: month + 80
      year = norwegianYear(+m[3], +m[4]);
    } else if (code === "se") {
      month = +m[3];
      day = +m[4]; // a samordningsnummer (day + 60) is no personnummer: the server refuses it too
      if (m[1]) year = +(m[1] + m[2]);
      else {
        // Ten digits name no century: as python-stdnum, this century unless the year is ahead, a century less for
        // "+" (a hundred years old); then, as the server, a day still ahead is a century earlier.
        year = 2000 + +m[2] - (+m[2] > new Date().getFullYear() % 100 ? 100 : 0) - (m[5] === "+" ? 100 : 0);
        if (Date.UTC(year, month - 1, day) > Date.now()) year -= 100;
      }
    } else {
      const sign = m[4].toUpperCase();
      year = (sign === "+" ? 1800 : "ABCDEF".includes(sign) ? 2000 : 1900) + +m[3];
      month = +m[2];
      day = +m[1];
      if (+m[5] < 2) return null; // individual numbers start at 002
    }
    const born = year && new Date(Date.UTC(year, month - 1, day));
    const valid = born && born.getUTCMonth() === month - 1 && born.getUTCDate() === day && born <= new Date();
    return valid ? BORN_FORMAT.format(born) : null;
  }

  // Of the shapes a number has (a Finnish 131052-9030 has a Swedish one too), the first it is valid for, else the
  // first: as the server infers the country.
  function read(value) {
    const number = value.trim();
    const candidates = SHAPES.filter(([, shape]) => shape.test(number)).map(([code, shape]) => ({
      code,
      born: bornOf(code, number.match(shape)),
      checks: CHECKS[code](number),
    }));
    return candidates.find((candidate) => candidate.checks && candidate.born) || candidates[0] || null;
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
    const mistyped = Boolean(found) && !(found.checks && found.born);
    if (mistyped) parts.push(found.checks ? reading.dataset.badDate : reading.dataset.badCheck);
    else if (found && found.born) parts.push(`${reading.dataset.bornLabel} ${found.born}`);
    reading.textContent = parts.join(" · "); // a live region stays in place, empty or not, to be read out
    reading.classList.toggle("text-warning-emphasis", otherCountry || mistyped);
  }

  input.addEventListener("input", update);
  country.addEventListener("change", () => {
    chosenByPerson = true;
    update();
  });
  // The footer's language form carries what is typed here, as the sign-in page's does: the server answers with this
  // form in the language chosen, still holding it (the way back to the page started it empty). Only when something
  // was typed: an untouched form comes back as a plain page.
  const createForm = input.form;
  const languageForm = document.querySelector("form.language-form");
  const KEPT = ["country", "national_id", "last_name", "redirect_url", "webhook_url", "real_person", "typed_by"];
  function holdsInput() {
    const { national_id: id, last_name: name, redirect_url: redirect, webhook_url: webhook } = createForm.elements;
    const changed = (field) => field.value !== field.defaultValue;
    return Boolean(id.value.trim() || name.value.trim()) || changed(redirect) || changed(webhook);
  }
  languageForm?.addEventListener("submit", () => {
    for (const carried of languageForm.querySelectorAll("input.carried-input")) carried.remove();
    if (!holdsInput()) return;
    for (const name of KEPT) {
      const field = createForm.elements[name];
      if (!field) continue;
      const carried = Object.assign(document.createElement("input"), { type: "hidden", name: `kept-${name}` });
      carried.className = "carried-input";
      carried.value = field.type === "checkbox" ? (field.checked ? "y" : "") : field.value;
      languageForm.append(carried);
    }
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
