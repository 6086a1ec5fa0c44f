package web

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
)

// orderPage serves /q/{queue}/order: the page of one queue, which offers only what that
// queue's admission tokens can buy (sellsThrough) — the product itself when it sells one, a
// chooser when it sells several. The list is in the page (no extra round trip before the
// buyer sees what is on sale); the script refreshes its stock from GET
// /api/products?queue=. ?product=<id> preselects one of them; a product the queue does not
// sell is never offered here: the page says where it is sold instead (404, no buy button).
// The order route refuses it anyway (token_wrong_queue).
func (s *Server) orderPage(c *fiber.Ctx) error {
	l, t := s.lang(c)
	ctx := c.UserContext()
	name := c.Params("queue")
	data := static.OrderPage{Lang: l, T: t, Queue: name, State: static.OrderReady}
	if !queue.ValidName(name) {
		data.Queue, data.State = "", static.OrderNoQueue
		return s.render(c, 404, "order", data)
	}
	st, err := s.d.Settings.Settings(ctx, name)
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		data.State = static.OrderNoQueue
		return s.render(c, 404, "order", data)
	case err == nil:
		data.Brand = s.pageBrand(ctx, st)
		data.T = s.messages.Overridden(data.T, l, st.Messages)
	}
	// Another error: the page is shown unbranded rather than failed (the products decide it).

	all, err := s.d.Orders.Products(ctx)
	if err != nil {
		s.log.Warn().Err(err).Str("queue", name).Msg("order page: cannot read the products")
		data.State = static.OrderUnavailable
		c.Set(fiber.HeaderRetryAfter, "2")
		return s.render(c, 503, "order", data)
	}
	sold := s.sellsThrough(all, name)
	for _, p := range sold {
		data.Products = append(data.Products, orderProduct(p, t))
	}
	asked := c.Query("product")
	id, ok := chooseProduct(sold, asked)
	switch {
	case !ok:
		data.State = static.OrderNotHere
		data.NotHere, data.SoldIn = s.notSoldHere(all, asked, t)
		return s.render(c, 404, "order", data)
	case id == "":
		data.State = static.OrderEmpty
	}
	data.ProductID = id
	return s.render(c, 200, "order", data)
}

// sellsThrough is the part of all that queue name's admission tokens can buy: the products
// that name it, and the products that name no queue when WR_UNBOUND_PRODUCTS_QUEUE is name
// (the order route's orderQueues decides the same way).
func (s *Server) sellsThrough(all []orders.Product, name string) []orders.Product {
	var out []orders.Product
	if name == "" {
		return nil
	}
	for _, p := range all {
		if p.Queue == name || (p.Queue == "" && s.cfg.UnboundQueue != "" && s.cfg.UnboundQueue == name) {
			out = append(out, p)
		}
	}
	return out
}

// chooseProduct picks the product the page shows first among sold: asked when it is one of
// them; with nothing asked, the first in stock, else the first; "" when sold is empty. ok is
// false when asked names a product that is not in sold (of another queue, of none, unknown).
func chooseProduct(sold []orders.Product, asked string) (id string, ok bool) {
	if asked != "" {
		for _, p := range sold {
			if p.ID == asked {
				return p.ID, true
			}
		}
		return "", false
	}
	for _, p := range sold {
		if p.Stock > 0 {
			return p.ID, true
		}
	}
	if len(sold) > 0 {
		return sold[0].ID, true
	}
	return "", true
}

// notSoldHere says why the asked-for product is not offered on this page, and which queue
// sells it ("" when none does).
func (s *Server) notSoldHere(all []orders.Product, asked string, t map[string]string) (text, soldIn string) {
	for _, p := range all {
		if p.ID != asked {
			continue
		}
		q := p.Queue
		if q == "" {
			q = s.cfg.UnboundQueue
		}
		if q == "" {
			return fill(t["order_not_here_none"], "{product}", p.Name), ""
		}
		return fill(t["order_not_here_other"], "{product}", p.Name, "{queue}", q), q
	}
	if queue.ValidName(asked) {
		return fill(t["order_not_here_unknown"], "{product}", asked), ""
	}
	return fill(t["order_not_here_unknown"], "{product}", "?"), ""
}

// orderProduct is a product as the order page lists it, with the texts it shows before its
// script formats the price in the page's language.
func orderProduct(p orders.Product, t map[string]string) static.OrderProduct {
	j := toProductJSON(p)
	out := static.OrderProduct{ID: j.ID, Name: j.Name, Price: j.Price, Currency: j.Currency, CurrencyDigits: j.CurrencyDigits,
		Stock: j.Stock, MaxPerOrder: j.MaxPerOrder, MaxPerTicket: j.MaxPerTicket}
	out.PriceText = minorText(j.Price, j.CurrencyDigits) + " " + j.Currency
	out.StockText = t["stock_sold_out"]
	if j.Stock > 0 {
		out.StockText = fill(t["stock_left"], "{n}", groupThousands(strconv.FormatInt(j.Stock, 10)))
	}
	out.Caps = fill(t["order_caps"], "{order}", strconv.Itoa(j.MaxPerOrder), "{ticket}", strconv.Itoa(j.MaxPerTicket))
	return out
}

// minorText writes an amount in minor units with its currency's decimals: 18900000 with 2
// digits is "189,000.00", 189000 with 0 is "189,000".
func minorText(minor int64, digits int) string {
	neg := minor < 0
	if neg {
		minor = -minor
	}
	s := strconv.FormatInt(minor, 10)
	frac := ""
	if digits > 0 {
		for len(s) <= digits {
			s = "0" + s
		}
		s, frac = s[:len(s)-digits], "."+s[len(s)-digits:]
	}
	s = groupThousands(s) + frac
	if neg {
		s = "-" + s
	}
	return s
}

func groupThousands(digits string) string {
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fill puts values into a message's {placeholders}: fill(msg, "{n}", "3").
func fill(msg string, oldnew ...string) string { return strings.NewReplacer(oldnew...).Replace(msg) }
