// The embedded widget, no build step: the room's waitroom.js on this page joins, streams and
// orders across origins. The room answers CORS for this origin once it is in the queue's
// allowed_origins; the ticket travels as a Bearer token and ?ticket= on the stream, so no
// third-party cookie is involved. The order is the room's: POST {room}/api/orders with the
// admission token, answered {"order":{"id",…}}.
(function () {
  'use strict';
  var main = document.getElementById('main');
  var ROOM = main.dataset.room, QUEUE = main.dataset.queue, PRODUCT = main.dataset.product;
  var $ = function (id) { return document.getElementById(id); };
  var place = $('place'), buy = $('buy'), result = $('result'), notice = $('notice');
  var token = null;
  var joined = false;
  var shown = false; // the product's name, price and stock are on the page

  function explain(reason, text) {
    notice.dataset.reason = reason;
    notice.textContent = text;
    notice.hidden = false;
  }
  function clearNotice() {
    notice.hidden = true;
    notice.dataset.reason = '';
  }
  function unreachable(retryIn) {
    explain('unreachable', 'The waiting room at ' + ROOM + ' gave this page no answer it may read. Either the room is ' +
      'not running, or this page\'s origin (' + location.origin + ') is not in the allowed_origins of queue "' + QUEUE +
      '" (examples/shop/README.md, step 3).' + (retryIn ? ' Trying again in ' + retryIn + ' s.' : ''));
  }

  function price(p) {
    var d = typeof p.currency_digits === 'number' ? p.currency_digits : 2;
    try {
      return new Intl.NumberFormat('en', { style: 'currency', currency: p.currency || 'USD', minimumFractionDigits: d, maximumFractionDigits: d })
        .format(p.price / Math.pow(10, d));
    } catch (_) {
      return (p.price / Math.pow(10, d)).toFixed(d) + ' ' + p.currency;
    }
  }

  // The room's product: its name, price and stock. Resolves to the stock, or null.
  function product() {
    return fetch(ROOM + '/api/products/' + encodeURIComponent(PRODUCT), { credentials: 'omit' }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (p) {
        if (res.status === 404) {
          explain('product_not_found', 'The waiting room has no product "' + PRODUCT + '". Start the shop with -product set to a product of queue "' + QUEUE + '".');
          return null;
        }
        if (!res.ok) {
          explain('product_error', 'The waiting room answered ' + res.status + ' for product "' + PRODUCT + '".');
          return null;
        }
        if (p.queue !== QUEUE) {
          explain('product_wrong_queue', 'Product "' + PRODUCT + '" is sold through ' + (p.queue ? 'queue "' + p.queue + '"' : 'no queue') +
            ', not queue "' + QUEUE + '": the room would refuse its order. Start the shop with matching -queue and -product.');
        }
        $('product-name').textContent = p.name;
        $('product-price').textContent = price(p);
        $('stock').textContent = String(p.stock);
        $('stock').dataset.stock = String(p.stock);
        shown = true;
        return p.stock;
      });
    }, function () {
      if (!joined) unreachable(0);
      return null;
    });
  }
  // The product on arrival, again until it is shown (a room that just allowed this origin
  // answers within a couple of seconds).
  (function load(tries) {
    product().then(function () { if (!shown && tries > 1) setTimeout(function () { load(tries - 1); }, 2000); });
  })(10);

  WaitRoom.join({
    queue: QUEUE,
    baseUrl: ROOM,
    onState: function (s) { $('conn').textContent = s; },
    onJoin: function () {
      joined = true;
      if (notice.dataset.reason === 'unreachable') clearNotice();
      if (!shown) product();
    },
    onPosition: function (p) {
      if (p.position == null) return;
      place.dataset.position = String(p.position);
      place.textContent = 'You are number ' + p.position + ' in line (' + p.waiting + ' waiting).' + (p.sold_out ? ' Sold out for now: your place is kept.' : '');
    },
    onAdmitted: function (a) {
      token = a.token;
      place.dataset.position = '0';
      place.textContent = 'Your turn! Buy within the time the waiting room gives you.';
      buy.hidden = false;
      buy.focus();
    },
    onExpired: function () {
      token = null;
      buy.hidden = true;
      place.dataset.position = '';
      place.textContent = 'Your turn has passed. Reload the page to take a new place.';
    },
    onClosed: function () {
      buy.hidden = true;
      place.textContent = 'The sale has ended.';
    },
    onError: function (e) {
      if (e.status === 0 && !joined) return unreachable(e.retryIn);
      if (e.fatal) explain(e.code || 'refused', 'The line refused: ' + (e.message || e.code || e.status) + '.');
    },
  });

  buy.addEventListener('click', function () {
    if (!token) return;
    buy.disabled = true;
    result.textContent = '';
    result.dataset.state = 'ordering';
    var key = Array.prototype.map.call(crypto.getRandomValues(new Uint8Array(16)), function (b) { return (b + 256).toString(16).slice(1); }).join('');
    product().then(function (before) {
      return fetch(ROOM + '/api/orders', {
        method: 'POST', credentials: 'omit',
        headers: {
          'Content-Type': 'application/json',
          Authorization: 'Bearer ' + WaitRoom.ticket(QUEUE, { baseUrl: ROOM }),
          'X-Admission-Token': token,
          'Idempotency-Key': key,
        },
        body: JSON.stringify({ product_id: PRODUCT, quantity: 1 }),
      }).then(function (res) {
        return res.json().catch(function () { return {}; }).then(function (b) {
          if (!res.ok || !b.order) {
            result.dataset.state = 'refused';
            result.textContent = 'The order was refused: ' + ((b.error && (b.error.message || b.error.code)) || res.status) +
              (b.error && b.error.code ? ' (' + b.error.code + ')' : '');
            buy.disabled = false;
            return;
          }
          WaitRoom.clearToken(QUEUE);
          token = null;
          buy.hidden = true;
          place.textContent = 'You bought your pair: your turn is used.';
          return product().then(function (after) {
            var id = $('order-id');
            id.textContent = b.order.id;
            id.dataset.orderId = b.order.id;
            $('order-product').textContent = $('product-name').textContent;
            $('stock-before').textContent = String(before);
            $('stock-before').dataset.stock = String(before);
            $('stock-after').textContent = String(after);
            $('stock-after').dataset.stock = String(after);
            $('receipt').hidden = false;
            result.dataset.state = 'ordered';
            $('receipt-heading').focus();
          });
        });
      });
    }).catch(function (e) {
      result.dataset.state = 'refused';
      result.textContent = 'The waiting room could not be reached: ' + e + '.';
      buy.disabled = false;
    });
  });
})();
