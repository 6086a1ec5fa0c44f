package shop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// session is what the shop keeps for a buyer the room admitted: the ticket hash the room's
// redeem answered (the buyer's identity in the line) and the one order the admission buys.
type session struct {
	TicketHash string
	Order      *Order
}

// Order is the shop's own order, placed in a session that a redeemed token opened. The
// example keeps it in memory; a real shop writes it to its own database.
type Order struct {
	ID        string    `json:"id"`
	Product   string    `json:"product_id"`
	Quantity  int       `json:"quantity"`
	CreatedAt time.Time `json:"created_at"`
}

type errorJSON struct {
	Error string `json:"error"`
}

type sessionJSON struct {
	OK         bool   `json:"ok"`
	Queue      string `json:"queue,omitempty"`
	TicketHash string `json:"ticket_hash"`
	Order      *Order `json:"order"`
}

// admit takes the token the page found in its fragment: verified offline (JWKS), then
// redeemed once at the room; only then does the shop open its own session.
func (s *Shop) admit(w http.ResponseWriter, r *http.Request) {
	if !isJSON(r) {
		reply(w, http.StatusUnsupportedMediaType, errorJSON{Error: "send the token as application/json"})
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil || body.Token == "" {
		reply(w, http.StatusBadRequest, errorJSON{Error: `no token: send {"token":"<the #wr_token= value>"}`})
		return
	}
	if _, err := s.verify(r.Context(), body.Token); err != nil {
		reply(w, http.StatusUnauthorized, errorJSON{Error: "token refused: " + err.Error()})
		return
	}
	code, red, err := s.redeem(r.Context(), body.Token)
	switch {
	case err != nil:
		reply(w, http.StatusBadGateway, errorJSON{Error: "the waiting room could not be asked: " + err.Error()})
		return
	case code == http.StatusConflict:
		reply(w, http.StatusConflict, errorJSON{Error: "this token was used already"})
		return
	case code != http.StatusOK:
		reply(w, http.StatusUnauthorized, errorJSON{Error: fmt.Sprintf("the waiting room refused the token (%d)", code)})
		return
	}
	sid := randomHex(16)
	s.mu.Lock()
	s.sessions[sid] = &session{TicketHash: red.TicketHash}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "shop_session", Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	reply(w, http.StatusOK, sessionJSON{OK: true, Queue: red.Queue, TicketHash: red.TicketHash})
}

// session answers the buyer's session (and its order, once placed), or 401.
func (s *Shop) session(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessionOf(r)
	if se == nil {
		reply(w, http.StatusUnauthorized, errorJSON{Error: "no session: take a place in the line first"})
		return
	}
	reply(w, http.StatusOK, sessionJSON{OK: true, TicketHash: se.TicketHash, Order: se.Order})
}

// order places the shop's own order in the session: one per admission, as the room's token
// bought one turn. A second order answers 409 with the first one.
func (s *Shop) order(w http.ResponseWriter, r *http.Request) {
	if !isJSON(r) { // also makes a cross-site form post impossible (it cannot send JSON)
		reply(w, http.StatusUnsupportedMediaType, errorJSON{Error: "send the order as application/json"})
		return
	}
	var body struct {
		Quantity int `json:"quantity"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil || body.Quantity != 1 {
		reply(w, http.StatusUnprocessableEntity, errorJSON{Error: `send {"quantity":1}: one pair per turn`})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessionOf(r)
	switch {
	case se == nil:
		reply(w, http.StatusUnauthorized, errorJSON{Error: "no session: take a place in the line first"})
	case se.Order != nil:
		reply(w, http.StatusConflict, struct {
			Error string `json:"error"`
			Order *Order `json:"order"`
		}{"this turn has bought already", se.Order})
	default:
		se.Order = &Order{ID: "S-" + strings.ToUpper(randomHex(6)), Product: s.cfg.Product, Quantity: 1, CreatedAt: time.Now().UTC()}
		reply(w, http.StatusCreated, struct {
			Order *Order `json:"order"`
		}{se.Order})
	}
}

// sessionOf is the request's session or nil; s.mu is held.
func (s *Shop) sessionOf(r *http.Request) *session {
	c, err := r.Cookie("shop_session")
	if err != nil {
		return nil
	}
	return s.sessions[c.Value]
}

func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
