// The redirect flow, no build step. Step 1: send the buyer to the room's page with
// return_to = this page. Step 2 (back here): the token is in the fragment, which the browser
// never sends to any server; take it out of the address and hand it to this shop's backend,
// which checks it with the room's public keys and redeems it once. Step 3: the session is
// this shop's; the buyer orders from this shop.
(function () {
  'use strict';
  var main = document.getElementById('main');
  var ROOM = main.dataset.room, QUEUE = main.dataset.queue;
  var status = document.getElementById('status');
  var join = document.getElementById('join');
  var turn = document.getElementById('turn');
  var buy = document.getElementById('buy');
  var receipt = document.getElementById('receipt');
  var error = document.getElementById('error');
  var here = location.href.split('#')[0];
  join.href = ROOM + '/q/' + encodeURIComponent(QUEUE) + '?return_to=' + encodeURIComponent(here);

  function say(state, text) {
    status.dataset.state = state;
    status.textContent = text;
  }
  function fail(text) {
    error.textContent = text;
    error.hidden = false;
  }
  function api(method, path, body) {
    var init = { method: method, credentials: 'same-origin', headers: {} };
    if (body) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (b) { return { res: res, b: b }; });
    });
  }
  function opened(s) {
    join.hidden = true;
    document.getElementById('ticket-hash').textContent = String(s.ticket_hash || '').slice(0, 12) + '…';
    if (s.order) return ordered(s.order);
    say('admitted', 'You are in: the waiting room let you through and this shop checked your turn.');
    turn.hidden = false;
    document.getElementById('turn-heading').focus();
  }
  function ordered(o) {
    turn.hidden = true;
    var id = document.getElementById('order-id');
    id.textContent = o.id;
    id.dataset.orderId = o.id;
    document.getElementById('order-product').textContent = o.product_id;
    say('ordered', 'Your order is placed.');
    receipt.hidden = false;
    document.getElementById('receipt-heading').focus();
  }

  buy.addEventListener('click', function () {
    buy.disabled = true;
    error.hidden = true;
    api('POST', '/shop/api/orders', { quantity: 1 }).then(function (r) {
      if (r.b.order) return ordered(r.b.order); // 201, or 409 with the order this turn bought
      buy.disabled = false;
      fail('The order failed: ' + (r.b.error || r.res.status) + '.');
    }).catch(function (e) {
      buy.disabled = false;
      fail('The shop could not be reached: ' + e + '.');
    });
  });

  var token = takeToken();
  if (!token) {
    // No token: a buyer who comes back to this page keeps the session the shop opened.
    api('GET', '/shop/api/session').then(function (r) { if (r.res.ok && r.b.ok) opened(r.b); }).catch(function () {});
    return;
  }
  join.hidden = true;
  say('checking', 'Checking your turn…');
  api('POST', '/shop/api/admit', { token: token }).then(function (r) {
    if (r.res.ok && r.b.ok) return opened(r.b);
    say(r.res.status === 409 ? 'used' : 'refused', 'Not admitted: ' + (r.b.error || r.res.status) + '. Take a new place in the line.');
    join.hidden = false;
  }).catch(function (e) {
    say('error', 'The shop could not check your turn: ' + e + '.');
    join.hidden = false;
  });

  // The token from #wr_token=…, removed from the address (not in history or bookmarks).
  // WaitRoom.takeReturnedToken() does the same; this page does not load the room's script.
  function takeToken() {
    var m = /(?:^#|&)wr_token=([^&]+)/.exec(location.hash || '');
    if (!m) return null;
    history.replaceState(null, '', location.pathname + location.search);
    try { return decodeURIComponent(m[1]); } catch (_) { return null; }
  }
})();
