package mcpserve

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// callDigest identifies a call: session, tool and arguments (canonical JSON, so a client
// that re-encodes them in another key order still matches).
func callDigest(sessionID, tool string, args json.RawMessage) ([]byte, error) {
	m, err := tools.DecodeArgs(args)
	if err != nil {
		// Unparseable arguments fail the call anyway; they still identify it.
		m = map[string]any{"raw": string(args)}
	}
	canon, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("request state: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", sessionID, tool)
	h.Write(canon)
	return h.Sum(nil), nil
}

// stateBody is what a request state carries besides the call and the expiry: the
// questions of its input_required result and the answers of the earlier rounds. Nonce
// makes every state dsh issues a new one: a state is accepted once, and the same call
// asked again within the second must not find its state used.
type stateBody struct {
	Nonce string       `json:"n"`
	Asked []stateEntry `json:"asked,omitempty"`
	Given []stateEntry `json:"given,omitempty"`
}

// stateEntry is one question (Key, the digest of its text) and, for a given answer,
// the answer.
type stateEntry struct {
	Key      string           `json:"k"`
	Question string           `json:"q"`
	Answer   container.Answer `json:"a,omitempty"`
}

// signState returns "<expiry unix>.<body>.<mac>": body as base64url JSON, and an HMAC
// over the call digest, the expiry and the body.
func signState(key, digest []byte, expiry time.Time, body stateBody) string {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	data, _ := json.Marshal(body) // strings only: it cannot fail
	payload := base64.RawURLEncoding.EncodeToString(data)
	return exp + "." + payload + "." + base64.RawURLEncoding.EncodeToString(stateMAC(key, digest, exp, payload))
}

// verifyState checks that state is one signed with key for digest and has not expired,
// and returns its body. An expiry more than requestStateTTL ahead is refused whatever
// the signature: the key is derived from the principal's token, so a holder of the
// token could sign any expiry, and no state dsh issues claims more.
func verifyState(key, digest []byte, state string, now time.Time) (stateBody, bool) {
	var body stateBody
	parts := strings.Split(state, ".")
	if len(parts) != 3 {
		return body, false
	}
	exp, payload, mac := parts[0], parts[1], parts[2]
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.After(time.Unix(unix, 0)) || time.Unix(unix, 0).After(now.Add(requestStateTTL+time.Second)) {
		return body, false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, stateMAC(key, digest, exp, payload)) {
		return body, false
	}
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(data, &body) != nil {
		return stateBody{}, false
	}
	return body, true
}

func stateMAC(key, digest []byte, exp, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(digest)
	m.Write([]byte(exp))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// usedStates remembers the request states that carried an answer until they expire, so
// that each is accepted once: a retry replayed (the same accepted approval POSTed again)
// runs nothing a second time. Replicas behind a load balancer do not share it: a replay
// to another replica is refused only by the expiry.
type usedStates struct {
	mu   sync.Mutex
	used map[string]time.Time // state → its expiry
}

// take records state (expiring at expiry) and reports whether it was new.
func (u *usedStates) take(state string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for s, exp := range u.used {
		if now.After(exp) {
			delete(u.used, s)
		}
	}
	if _, dup := u.used[state]; dup {
		return false
	}
	if u.used == nil {
		u.used = map[string]time.Time{}
	}
	u.used[state] = now.Add(requestStateTTL + time.Second)
	return true
}
