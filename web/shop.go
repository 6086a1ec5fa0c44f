package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
)

// productJSON is a product as the public and admin APIs show it. Price is in the minor
// units of Currency; CurrencyDigits (ISO 4217's minor unit: 0 for KRW and JPY, 2 for USD)
// is sent with it so that a page shows price / 10^digits without a currency table of its
// own that could disagree with the server's.
type productJSON struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Price          int64   `json:"price"`
	Currency       string  `json:"currency"`
	CurrencyDigits int     `json:"currency_digits"`
	Stock          int64   `json:"stock"`
	Queue          *string `json:"queue"` // null: not on sale through the order API
	MaxPerOrder    int     `json:"max_per_order"`
	MaxPerTicket   int     `json:"max_per_ticket"`
}

func toProductJSON(p orders.Product) productJSON {
	digits, _ := orders.CurrencyDigits(p.Currency)
	out := productJSON{ID: p.ID, Name: p.Name, Price: p.Price, Currency: p.Currency, CurrencyDigits: digits,
		Stock: int64(p.Stock), MaxPerOrder: p.MaxPerOrder, MaxPerTicket: p.MaxPerTicket}
	if p.Queue != "" {
		out.Queue = &p.Queue
	}
	return out
}

// products answers GET /api/products: every product, or with ?queue=<name> the products
// that queue's admission tokens can buy (those naming it, and those naming no queue when
// WR_UNBOUND_PRODUCTS_QUEUE is that queue) — what its order page offers. An unknown queue
// sells nothing (an empty list); a malformed name is a 422.
func (s *Server) products(c *fiber.Ctx) error {
	ps, err := s.productsQuery(c)
	if err != nil {
		return err
	}
	out := make([]productJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, toProductJSON(p))
	}
	return c.JSON(fiber.Map{"products": out})
}

func (s *Server) productsQuery(c *fiber.Ctx) ([]orders.Product, error) {
	byQueue := c.Context().QueryArgs().Has("queue")
	name := c.Query("queue")
	if byQueue && !queue.ValidName(name) {
		return nil, &Error{Status: 422, Code: "invalid_queue", Field: "queue",
			Message: "queue must be a queue name: 1-64 characters of A-Z a-z 0-9 _ -."}
	}
	ps, err := s.d.Orders.Products(c.UserContext())
	if err != nil || !byQueue {
		return ps, err
	}
	return s.sellsThrough(ps, name), nil
}

func (s *Server) product(c *fiber.Ctx) error {
	id := c.Params("id")
	if !queue.ValidName(id) {
		return orders.ErrNotFound
	}
	p, err := s.d.Orders.Product(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(toProductJSON(p))
}

// decodeJSON reads a JSON object body strictly: malformed → 400, wrong types → 422.
func decodeJSON(c *fiber.Ctx, v any) error { return decodeBody(c.Body(), v) }

func decodeBody(b []byte, v any) error {
	if len(b) == 0 {
		return errorf(400, "malformed_json", "The request body must be a JSON object.")
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field == "":
			// The body itself is not an object (an array, a string, a number).
			return errorf(422, "invalid_field", "The request body must be a JSON object.")
		case errors.As(err, &te):
			return &Error{Status: 422, Code: "invalid_field", Field: te.Field, Message: "Field " + te.Field + " has the wrong type."}
		}
		return errorf(400, "malformed_json", "The request body is not valid JSON.")
	}
	return nil
}

type orderBody struct {
	ProductID *string `json:"product_id"`
	Quantity  *int    `json:"quantity"`
}

// parseOrder validates an order body: 400 when it is not JSON, 422 when a field is
// missing, of the wrong type or out of range.
func parseOrder(body []byte) (productID string, quantity int, err error) {
	var b orderBody
	if err := decodeBody(body, &b); err != nil {
		return "", 0, err
	}
	if b.ProductID == nil || !queue.ValidName(*b.ProductID) {
		return "", 0, &Error{Status: 422, Code: "invalid_order", Field: "product_id", Message: "product_id must be 1-64 characters of A-Z a-z 0-9 _ -."}
	}
	if b.Quantity == nil || *b.Quantity <= 0 || *b.Quantity > orders.MaxQuantity {
		return "", 0, &Error{Status: 422, Code: "invalid_order", Field: "quantity", Message: "quantity must be an integer from 1 to 1000."}
	}
	return *b.ProductID, *b.Quantity, nil
}

// orderQueues is the order route's GuardConfig.QueuesFor: the queue that sells the product
// in the body. A product that names no queue is not on sale here (403).
func (s *Server) orderQueues(c *fiber.Ctx) ([]string, error) {
	productID, _, err := parseOrder(c.Body())
	if err != nil {
		return nil, err
	}
	p, err := s.d.Orders.Product(c.UserContext(), productID)
	if err != nil {
		return nil, err
	}
	if p.Queue == "" && s.cfg.UnboundQueue != "" {
		return []string{s.cfg.UnboundQueue}, nil
	}
	if p.Queue == "" {
		return nil, errorf(403, "product_not_on_sale", "This product is not on sale through the waiting room.")
	}
	return []string{p.Queue}, nil
}

func (s *Server) placeOrder(c *fiber.Ctx) error {
	productID, quantity, err := parseOrder(c.Body())
	if err != nil {
		return err
	}
	ticket, _ := c.Locals(LocalTicket).(string)
	if open, _ := c.Locals(LocalFailOpen).(bool); open {
		if !s.failOpenAllow() {
			return &Error{Status: 429, Code: "rate_limited", Message: "Too many orders right now; retry shortly.", RetryAfter: 1, Scope: "global"}
		}
		s.m.failOpen.Inc()
	}
	token := orderTokenID(c.Get("X-Admission-Token"))
	o, replayed, err := s.d.Orders.PlaceOrder(c.UserContext(), orders.OrderRequest{
		ProductID: productID, Quantity: quantity, Ticket: ticket, IdempotencyKey: c.Get("Idempotency-Key"),
		TokenID: token,
	})
	if errors.Is(err, orders.ErrTokenUsed) {
		// The token store let a token through that the order store says has bought: a Redis
		// failover lost the write that marked it used (or the guard's consume after that
		// order failed). The same answer as a used token gets from the guard, and the mark
		// is written again.
		s.markTokenUsed(c, ticket, token, err)
		return errTokenUsed()
	}
	if err != nil {
		return err
	}
	// An order that took the last of its product brings its queue's stock judged in its
	// transaction; a replay changed no stock.
	if o.Emptied != nil && !replayed {
		s.applySoldOut(c.UserContext(), "an order", *o.Emptied)
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"order": fiber.Map{
		"id": o.ID, "product_id": o.ProductID, "quantity": o.Quantity, "created_at": o.CreatedAt,
	}})
}

// errTokenUsed is the guard's answer to a used token (admission's refusal for the verdict
// "used"), given also when the order store finds that the token has bought.
func errTokenUsed() *Error {
	return errorf(401, "token_invalid", "This admission token has already been used.")
}

// orderTokenID is the stable id of the admission token an order presents, as the order
// store records it: the id the token store keeps, which a signed token carries as its jti
// and a bare token is, so that one admission presented either way is one id. The guard
// has verified the token before the handler runs (a fail-open pass excepted: then the id is
// only a claim, which can burn nothing but the token it names). "" when raw has neither
// shape.
func orderTokenID(raw string) string {
	if strings.Count(raw, ".") == 2 {
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[1])
		var claims struct {
			ID string `json:"jti"`
		}
		if err != nil || json.Unmarshal(payload, &claims) != nil {
			return ""
		}
		raw = claims.ID
	}
	if !queue.ValidToken(raw) {
		return ""
	}
	return strings.ToLower(raw)
}

// markTokenUsed marks the token used again in the token store after the order store
// refused it as used, so that later tries are refused by the guard (and its max_active
// slot is free). The mark carries the first order's Idempotency-Key, so repeats of that
// order are still answered with it (the token store's replay verdict). It also ends this
// request's claim; the guard's release after the refusal then finds nothing to drop. A
// failure is logged: the order store refuses the token again next time.
func (s *Server) markTokenUsed(c *fiber.Ctx, ticket, token string, err error) {
	name, _ := c.Locals(LocalQueue).(string)
	if name == "" || ticket == "" || token == "" {
		return
	}
	key := "r-" + newID()
	var used *orders.TokenUsedError
	if errors.As(err, &used) && used.IdempotencyKey != "" {
		key = used.IdempotencyKey
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), guardTimeout)
	defer cancel()
	s.log.Warn().Str("queue", name).Str("order_id", orderOf(used)).
		Msg("order: the token store let through a token that has bought (a failover's lost write, or a failed consume); marking it used again")
	if err := s.d.Tokens.ConsumeToken(ctx, queue.Ticket{Queue: name, ID: ticket}, token, key); err != nil {
		s.log.Warn().Err(err).Str("queue", name).Msg("order: cannot mark the used token used again")
	}
}

func orderOf(e *orders.TokenUsedError) string {
	if e == nil {
		return ""
	}
	return e.OrderID
}
