/*
 * index.js — the index page /. The server writes each queue's start and end as
 * <time class="local-time" datetime="RFC 3339"> (the text is the same UTC time, for pages
 * without scripts); this shows them in the buyer's own time zone and language, with the
 * date when it is not today. Nothing else on the page needs a script.
 */
(function () {
  'use strict';

  const lang = document.documentElement.lang || 'en';

  /** A time here, in this page's language: the time of day, with the date when not today. */
  function localText(d) {
    const today = new Date().toDateString() === d.toDateString();
    const opts = today ? { hour: 'numeric', minute: '2-digit' } : { dateStyle: 'medium', timeStyle: 'short' };
    try { return new Intl.DateTimeFormat(lang, opts).format(d); } catch (_) { return d.toLocaleString(lang); }
  }

  for (const el of document.querySelectorAll('time.local-time[datetime]')) {
    const d = new Date(el.getAttribute('datetime'));
    if (isNaN(d)) continue;
    el.textContent = localText(d);
    el.title = d.toISOString();
    el.dataset.local = 'true';
  }
})();
