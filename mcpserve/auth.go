package mcpserve

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// tokens are the bearer tokens Serve accepts, each with what is derived from it. Only
// digests are kept.
type tokens struct {
	sums [][32]byte // SHA-256 of each token
	ids  []string   // principal id of each token
	keys [][]byte   // request-state key of each token

	roles []string // role of each token's sessions ("" for none)
}

// newTokens derives, for each token, its principal id (the harness session id of the
// stateless lane: the same across restarts and replicas) and the key that signs its
// input_required request states (so every replica sharing the token verifies them).
// roles, if not nil, has the role of each token.
func newTokens(list, roles []string) tokens {
	t := tokens{roles: make([]string, len(list))}
	copy(t.roles, roles)
	for _, token := range list {
		t.sums = append(t.sums, sha256.Sum256([]byte(token)))
		id := sha256.Sum256([]byte("dsh principal\x00" + token))
		t.ids = append(t.ids, hex.EncodeToString(id[:8]))
		key := hmac.New(sha256.New, []byte(token))
		key.Write([]byte("dsh request state"))
		t.keys = append(t.keys, key.Sum(nil))
	}
	return t
}

// match returns the index of token among the configured ones, or -1. Every token is
// compared, in constant time.
func (t tokens) match(token string) int {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, s := range t.sums {
		if subtle.ConstantTimeCompare(sum[:], s[:]) == 1 {
			found = i
		}
	}
	return found
}

// authenticate answers 401 (unauthorized) unless the request carries one of the tokens (compared in constant time, against every token), and hands the SDK the
// token's principal as the TokenInfo user (the session lane then refuses a session to
// any other principal) and its role. A 401 closes its connection: a client without a
// valid token gets nothing more from it, and must not keep it open.
func (f *httpFront) authenticate(next http.Handler) http.Handler {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if i := f.auth.match(token); i >= 0 {
			ti := &auth.TokenInfo{UserID: f.auth.ids[i], Expiration: time.Now().Add(24 * time.Hour)}
			if role := f.auth.roles[i]; role != "" {
				ti.Extra = map[string]any{roleKey: role}
			}
			return ti, nil
		}
		return nil, auth.ErrInvalidToken
	}
	sdk := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		given := strings.EqualFold(scheme, "Bearer") && token != ""
		if !given || f.auth.match(token) < 0 {
			w.Header().Set("Connection", "close")
			// Nothing more is read from it, not even the rest of the body.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			unauthorized(w, given)
			return
		}
		markAuthenticated(r)
		sdk.ServeHTTP(w, r)
	})
}

// unauthorized answers 401 with the challenge of RFC 6750 §3: plain `Bearer` to a
// request without a bearer token, and `Bearer error="invalid_token"` to one whose token
// is wrong — which tells a client (the MCP Inspector among them) that its token was
// refused, rather than that it should discover an OAuth server and log in.
func unauthorized(w http.ResponseWriter, tokenGiven bool) {
	if !tokenGiven {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized: this endpoint needs Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	http.Error(w, "unauthorized: the bearer token is not one this server accepts", http.StatusUnauthorized)
}

// principalIndex is the index of the token r authenticated with, or -1.
func (f *httpFront) principalIndex(r *http.Request) int {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		for i, id := range f.auth.ids {
			if id == ti.UserID {
				return i
			}
		}
	}
	return -1
}
