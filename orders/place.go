package orders

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OrderRequest is one order. Ticket is stored as given; IdempotencyKey is optional.
//
// TokenID, when set, is the stable id of the admission token the order is bought with (the
// id the token store keeps: a signed token's jti): one token buys once. It is recorded with
// the order, in the transaction that takes the stock, so the order store stays the durable
// record of the token's use even when the token store forgets it (a Redis failover can lose
// the write that marked the token used).
type OrderRequest struct {
	ProductID      string
	Quantity       int
	Ticket         string
	IdempotencyKey string
	TokenID        string
}

// Order is a placed order.
type Order struct {
	ID        string    `json:"id"`
	ProductID string    `json:"product_id"`
	Quantity  int       `json:"quantity"`
	Ticket    string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	// Left is the product's stock the order left. Emptied is set when the order took the
	// last of it from a product on sale through a queue: the queue's stock judged in the
	// order's transaction, for its sold-out flag. A replayed order changed nothing: both
	// are zero.
	Left    int         `json:"-"`
	Emptied *QueueStock `json:"-"`
}

const (
	maxRetries     = 3
	maxKeyLen      = 255
	maxTicketLen   = 1024
	maxTokenIDLen  = 128
	retryBaseDelay = 10 * time.Millisecond
)

func (r OrderRequest) validate() error {
	switch {
	case !ValidID(r.ProductID):
		return invalid("product_id", "product_id must be 1–64 characters from A–Z a–z 0–9 _ -.")
	case r.Quantity < 1 || r.Quantity > MaxQuantity:
		return invalid("quantity", "quantity must be between 1 and %d.", MaxQuantity)
	case len(r.IdempotencyKey) > maxKeyLen:
		return invalid("Idempotency-Key", "Idempotency-Key must be at most %d bytes.", maxKeyLen)
	case len(r.Ticket) > maxTicketLen:
		return invalid("ticket", "The ticket is too long.")
	case len(r.TokenID) > maxTokenIDLen:
		return invalid("token", "The admission token id is too long.")
	}
	return nil
}

// hash identifies the request an idempotency key belongs to. The ticket is part of it,
// so a key reused by another ticket is a conflict rather than someone else's order. The
// token is not: a repeat of a request keeps its key's answer whatever token it carries.
func (r OrderRequest) hash() string {
	h := sha256.Sum256([]byte(r.ProductID + "\x00" + strconv.Itoa(r.Quantity) + "\x00" + r.Ticket))
	return hex.EncodeToString(h[:])
}

// PlaceOrder decrements the stock and records the order in one transaction.
//
// replayed is true when IdempotencyKey was already used for the same request: the first
// order is returned and nothing changes. The key is looked at before the token, so such a
// repeat is answered with its order although its token has bought. Errors wrap ErrInvalid,
// ErrNotFound, ErrSoldOut, ErrIdempotencyConflict, ErrQuantityLimit, ErrTokenUsed (TokenID
// already bought another order: nothing changed; the error is a *TokenUsedError) or
// ErrUnavailable (pool exhausted, database down, timeout, or an outcome that could not be
// determined — a retry with the same key is safe).
//
// The order id is generated here, before the INSERT. If a COMMIT's answer is lost, the
// attempt is repeated with the same id: it first looks the order up (by id and key) and,
// when it is not there, inserts with ON CONFLICT DO NOTHING, which waits for a COMMIT
// still in flight — so a lost answer never makes a second order.
func (s *Store) PlaceOrder(ctx context.Context, req OrderRequest) (o Order, replayed bool, err error) {
	start := time.Now()
	defer func() { s.m.observe(start, replayed, err) }()
	if err := req.validate(); err != nil {
		return Order{}, false, err
	}
	id, hash := uuid.NewString(), req.hash()
	for attempt := 0; ; attempt++ {
		o, replayed, err = s.placeOnce(ctx, req, id, hash)
		switch {
		case err == nil:
			return o, replayed, nil
		case errors.Is(err, errUnknownOutcome):
			s.m.retry(err)
			return s.resolve(ctx, req, id, hash, err)
		case !errors.Is(err, errRetry):
			return Order{}, false, fmt.Errorf("orders: place order: %w", err)
		case attempt == maxRetries:
			return Order{}, false, fmt.Errorf("orders: place order: still failing after %d retries: %w: %w",
				maxRetries, ErrUnavailable, err)
		}
		s.m.retry(err)
		// Full jitter, growing with the attempt: 0–10ms, 0–20ms, 0–40ms.
		delay := rand.N(retryBaseDelay<<attempt) + time.Millisecond
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return Order{}, false, fmt.Errorf("orders: place order: %w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// resolve settles a COMMIT whose outcome is unknown by repeating the attempt with the
// same order id (lookup first, then an insert that cannot duplicate). It gets its own
// time budget: the caller's deadline may be what expired during the COMMIT.
func (s *Store) resolve(ctx context.Context, req OrderRequest, id, hash string, cause error) (Order, bool, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.AcquireTimeout+s.cfg.QueryTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		o, replayed, err := s.placeOnce(rctx, req, id, hash)
		if err == nil {
			return o, replayed, nil
		}
		if errors.Is(err, errRetry) && attempt < maxRetries {
			continue
		}
		if errors.Is(err, errUnknownOutcome) || errors.Is(err, errRetry) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if errors.Is(err, ErrUnavailable) {
			return Order{}, false, fmt.Errorf("orders: place order: outcome unknown (%v), lookup failed: %w", cause, err)
		}
		return Order{}, false, fmt.Errorf("orders: place order: %w", err)
	}
}

// placeOnce is one attempt on one connection: look up, then the transaction.
func (s *Store) placeOnce(ctx context.Context, req OrderRequest, id, hash string) (Order, bool, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return Order{}, false, err
	}
	defer c.Release()
	qctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()

	key := nullable(req.IdempotencyKey)
	// One round trip answers: is the order already there (our id after a lost COMMIT
	// answer, or the key's first request), does the product exist, is there enough stock,
	// what are its per-buyer caps, how much has this ticket bought, and has the token bought
	// already (the unique index makes that one order at most).
	var stock, maxOrder, maxTicket *int
	var bought int
	var ex existing
	var used usedBy
	err = c.QueryRow(qctx, `
		SELECT p.stock, p.max_per_order, p.max_per_ticket,
			(SELECT COALESCE(sum(b.quantity), 0) FROM orders b WHERE b.ticket = $4 AND b.product_id = $1 AND $4 <> ''),
			o.id::text, o.product_id, o.ticket, o.quantity, o.request_hash, o.created_at,
			u.id::text, u.idempotency_key
		FROM (SELECT 1) AS one
		LEFT JOIN products p ON p.id = $1
		LEFT JOIN orders o ON o.id = $2::uuid OR o.idempotency_key = $3
		LEFT JOIN orders u ON u.token_id = $5`,
		req.ProductID, id, key, req.Ticket, nullable(req.TokenID)).Scan(&stock, &maxOrder, &maxTicket, &bought,
		&ex.ID, &ex.ProductID, &ex.Ticket, &ex.Quantity, &ex.Hash, &ex.CreatedAt, &used.ID, &used.Key)
	if err != nil {
		return Order{}, false, classify(err)
	}
	switch {
	// The key first: a repeat of a request that bought is answered with its order, not
	// refused for the token it bought with.
	case ex.ID != nil:
		return ex.settle(id, hash)
	// Then the token, before stock and caps: a token that bought is refused as such
	// whatever else has changed since.
	case used.ID != nil:
		return Order{}, false, used.err()
	case stock == nil:
		return Order{}, false, fmt.Errorf("product %q: %w", req.ProductID, ErrNotFound)
	case req.Quantity > *maxOrder:
		return Order{}, false, &QuantityLimitError{Limit: "max_per_order", Max: *maxOrder}
	// One ticket holds at most one live token, and each order request claims the token it
	// uses, so two orders of one ticket never run at once: this read cannot race.
	case bought+req.Quantity > *maxTicket:
		return Order{}, false, &QuantityLimitError{Limit: "max_per_ticket", Max: *maxTicket, Bought: bought}
	case *stock < req.Quantity:
		return Order{}, false, fmt.Errorf("product %q: %w", req.ProductID, ErrSoldOut)
	}

	o, err := s.insertOrder(qctx, c, req, id, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		// ON CONFLICT DO NOTHING: a concurrent request with the same key (or our own
		// earlier attempt), or one with the same token, committed first. Our transaction is
		// rolled back, so our stock decrement never happened; answer with the order that
		// won: the key's (ours, or a replay), else the token's (ErrTokenUsed).
		var ex existing
		err = c.QueryRow(qctx, `
			SELECT id::text, product_id, ticket, quantity, request_hash, created_at
			FROM orders WHERE id = $1::uuid OR idempotency_key = $2`, id, key).
			Scan(&ex.ID, &ex.ProductID, &ex.Ticket, &ex.Quantity, &ex.Hash, &ex.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) && req.TokenID != "" {
			var used usedBy
			err = c.QueryRow(qctx, `SELECT id::text, idempotency_key FROM orders WHERE token_id = $1`,
				req.TokenID).Scan(&used.ID, &used.Key)
			if err == nil {
				return Order{}, false, used.err()
			}
		}
		if err != nil {
			return Order{}, false, classify(err)
		}
		return ex.settle(id, hash)
	}
	if err != nil {
		return Order{}, false, err
	}
	return o, false, nil
}

// insertOrder runs the transaction: insert (first, so duplicates of one key queue on the
// unique index and never touch the stock row), guarded decrement, commit.
func (s *Store) insertOrder(ctx context.Context, c *pgxpool.Conn, req OrderRequest, id, hash string) (Order, error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return Order{}, classify(err)
	}
	defer func() {
		// No-op after Commit. A rollback that fails (dead connection) closes the
		// connection, and the pool drops it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	o := Order{ID: id, ProductID: req.ProductID, Quantity: req.Quantity, Ticket: req.Ticket}
	// No conflict target: the id, the idempotency key and the token (the partial unique
	// index orders_token_id_key) are all arbiters, and an insert that meets an uncommitted
	// row on any of them waits for that transaction's outcome.
	err = tx.QueryRow(ctx, `
		INSERT INTO orders (id, product_id, ticket, quantity, idempotency_key, request_hash, token_id)
		VALUES ($1::uuid, $2, $3, $4, $5, $6, $7)
		ON CONFLICT DO NOTHING
		RETURNING created_at`,
		id, req.ProductID, req.Ticket, req.Quantity, nullable(req.IdempotencyKey), hash, nullable(req.TokenID)).Scan(&o.CreatedAt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Order{}, err
		}
		return Order{}, classify(err)
	}
	var queue string
	err = tx.QueryRow(ctx, `UPDATE products SET stock = stock - $2, updated_at = now()
		WHERE id = $1 AND stock >= $2 RETURNING stock, COALESCE(queue, '')`, req.ProductID, req.Quantity).Scan(&o.Left, &queue)
	if errors.Is(err, pgx.ErrNoRows) {
		// The product exists (the insert's foreign key saw it): the stock ran out
		// between the lookup and now.
		return Order{}, fmt.Errorf("product %q: %w", req.ProductID, ErrSoldOut)
	}
	if err != nil {
		return Order{}, classify(err)
	}
	// Only an order that empties its product can make its queue sold out.
	if o.Left == 0 && queue != "" {
		st, err := judgeStock(ctx, tx, queue)
		if err != nil {
			return Order{}, classify(err)
		}
		o.Emptied = &st
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx, tx); err != nil {
			return Order{}, classify(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) {
			return Order{}, classify(err) // the server answered: definitely not committed
		}
		return Order{}, fmt.Errorf("%w: %w", errUnknownOutcome, err)
	}
	if s.afterCommit != nil {
		if err := s.afterCommit(); err != nil {
			return Order{}, fmt.Errorf("%w: %w", errUnknownOutcome, err)
		}
	}
	return o, nil
}

// existing is an order row read back, all columns nullable (LEFT JOIN).
type existing struct {
	ID, ProductID, Ticket, Hash *string
	Quantity                    *int
	CreatedAt                   *time.Time
}

// settle decides what an order found for our id or key means for this request.
func (e existing) settle(id, hash string) (Order, bool, error) {
	o := Order{ID: *e.ID, ProductID: *e.ProductID, Ticket: *e.Ticket, Quantity: *e.Quantity, CreatedAt: *e.CreatedAt}
	switch {
	case o.ID == id:
		return o, false, nil // our own attempt committed; its answer was lost
	case *e.Hash == hash:
		return o, true, nil
	default:
		return Order{}, false, ErrIdempotencyConflict
	}
}

// usedBy is the order a token already bought, read back (all nullable: LEFT JOIN).
type usedBy struct {
	ID, Key *string
}

func (u usedBy) err() error {
	e := &TokenUsedError{OrderID: *u.ID}
	if u.Key != nil {
		e.IdempotencyKey = *u.Key
	}
	return e
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
