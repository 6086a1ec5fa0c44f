/*
 * The footer's language switcher (every page). The server shows a page in the
 * language of ?lang=xx and remembers it in the wr_lang cookie (a year), so the
 * switch is a reload of the same address with lang set: the query (return_to,
 * product, …) and the fragment are kept, and the buyer's place is kept because
 * the ticket is in its own cookie. Once the page is shown, ?lang= is dropped
 * from the address bar (the cookie remembers it). The server lists every
 * language (data-codes too) and names the built-in ones in themselves; one an
 * operator added with WR_MESSAGES_DIR comes named by its code and is named here
 * with Intl.DisplayNames.
 */
'use strict';
(function () {
  const form = document.querySelector('form.lang-switch');
  if (!form) return;
  const select = form.querySelector('select');
  const current = document.documentElement.lang || 'en';
  const codes = (select.getAttribute('data-codes') || '').split(/\s+/).filter(Boolean);
  for (const code of codes) {
    let o = Array.from(select.options).find((x) => x.value === code);
    if (o && o.textContent !== code) continue; // named by the server
    if (!o) {
      o = document.createElement('option');
      o.value = code;
      o.lang = code;
      select.appendChild(o);
    }
    let name = code;
    try { name = new Intl.DisplayNames([code], { type: 'language' }).of(code) || code; } catch (_) { /* old browser */ }
    o.textContent = name;
  }
  select.value = current;
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (select.value === current) return;
    const url = new URL(location.href);
    url.searchParams.set('lang', select.value);
    location.assign(url.toString());
  });
  const here = new URL(location.href);
  if (here.searchParams.has('lang')) {
    here.searchParams.delete('lang');
    history.replaceState(history.state, '', here.toString());
  }
})();
