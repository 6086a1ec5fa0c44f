package web

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// challengeJSON is a proof-of-work challenge as the API hands it out (/challenge, and
// inside a 428 pow_required).
type challengeJSON struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
	ExpiresAt  string `json:"expires_at"`
}

func toChallengeJSON(c queue.PowChallenge) challengeJSON {
	return challengeJSON{Challenge: c.Challenge, Difficulty: c.Difficulty, ExpiresAt: c.Expires.UTC().Format(stream.TimeFormat)}
}

// challenge answers POST /api/queues/{queue}/challenge: a fresh stateless challenge at the
// queue's live pow_difficulty (0 when proof of work is off). It counts against the per-
// address join limit, being the first step of a join.
func (s *Server) challenge(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	if err := s.joinLimit(c); err != nil {
		return err
	}
	d, err := s.d.Settings.PowDifficulty(c.UserContext(), name)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(toChallengeJSON(s.newChallenge(c, name, d)))
}

// newChallenge issues a challenge for the caller: in a sharded pre-queue its id is of the
// caller's address's shard, where the join that spends it lands (queue/prequeue.go).
func (s *Server) newChallenge(c *fiber.Ctx, name string, difficulty int) queue.PowChallenge {
	return s.d.Signer.NewChallengeWhere(name, difficulty, time.Now(), s.d.Line.IDFits(c.UserContext(), name, clientKey(c), ""))
}

// powRequired is the 428 answer to a join that needs a proof of work of difficulty bits:
// the error shape plus a fresh challenge at that difficulty, so the client solves it
// without another round trip.
func (s *Server) powRequired(c *fiber.Ctx, name string, difficulty int) error {
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Challenge challengeJSON `json:"challenge"`
	}
	b.Error.Code = "pow_required"
	b.Error.Message = "Joining this queue needs a proof of work: solve the challenge and join again."
	b.Challenge = toChallengeJSON(s.newChallenge(c, name, difficulty))
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusPreconditionRequired).JSON(b)
}

// joinBody is the optional body of a join.
type joinBody struct {
	Pow *struct {
		Challenge *string `json:"challenge"`
		Nonce     *string `json:"nonce"`
	} `json:"pow"`
	Invite *string `json:"invite"`
}

// maxInvite bounds an invite code (the contract's maxLength).
const maxInvite = 128

// parseJoinBody reads the join body strictly: empty (or only white space) is no options
// (clients that send no body); not JSON or not an object → 400 malformed_json; an unknown
// field → 400 bad_request; a pow or invite of the wrong type or shape → 422 pow_invalid or
// invite_invalid naming the field.
func parseJoinBody(b []byte) (joinBody, error) {
	var jb joinBody
	if len(bytes.TrimSpace(b)) == 0 {
		return jb, nil
	}
	// The one strict parser of the admin bodies: exact, case-sensitive keys and a key given
	// twice at any depth → 400 duplicate_key; an unknown key keeps the join's documented
	// 400 bad_request.
	if err := decodeStrict(b, &jb); err != nil {
		var e *Error
		if errors.As(err, &e) {
			switch {
			case e.Code == codeUnknownField && strings.HasPrefix(e.Field, "pow."):
				return jb, errorf(400, "bad_request", "Unknown field "+strconv.Quote(strings.TrimPrefix(e.Field, "pow."))+" in pow: it takes challenge and nonce.")
			case e.Code == codeUnknownField:
				return jb, errorf(400, "bad_request", "Unknown field "+strconv.Quote(e.Field)+" in the join body: it takes pow and invite.")
			case e.Code == "invalid_field" && e.Field == "":
				return jb, errorf(400, "malformed_json", "The request body must be a JSON object.")
			case e.Code == "invalid_field" && e.Field == "invite":
				return jb, errInvite("invite must be a string.")
			case e.Code == "invalid_field": // pow or pow.challenge or pow.nonce
				return jb, errPow("pow must be an object with the strings challenge and nonce.")
			}
		}
		return jb, err // 400 malformed_json or 400 duplicate_key
	}
	if jb.Pow != nil && (jb.Pow.Challenge == nil || jb.Pow.Nonce == nil) {
		return jb, errPow("pow must carry both challenge and nonce.")
	}
	if jb.Invite != nil && len(*jb.Invite) > maxInvite {
		return jb, errInvite("invite codes are at most 128 characters.")
	}
	return jb, nil
}

func errPow(msg string) *Error {
	return &Error{Status: 422, Code: "pow_invalid", Field: "pow", Message: msg}
}

func errInvite(msg string) *Error {
	return &Error{Status: 422, Code: "invite_invalid", Field: "invite", Message: msg}
}

// joinOptions turns the body into the queue's join options, verifying a proof of work
// here (CPU only; the single-use record and the live difficulty are the join script's).
func (s *Server) joinOptions(c *fiber.Ctx, name string, jb joinBody) (queue.JoinOptions, error) {
	o := queue.JoinOptions{Client: clientKey(c)}
	if jb.Invite != nil {
		o.Invite = *jb.Invite
	}
	if jb.Pow != nil {
		p, err := s.d.Signer.VerifyPow(name, *jb.Pow.Challenge, *jb.Pow.Nonce, time.Now())
		if err != nil {
			s.log.Debug().Err(err).Str("queue", name).Msg("proof of work refused")
			return o, err
		}
		o.Pow = p
	}
	return o, nil
}
