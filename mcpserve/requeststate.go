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

// signState returns "<expiry unix>.<mac>": an HMAC over the call digest and the expiry.
func signState(key, digest []byte, expiry time.Time) string {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return exp + "." + base64.RawURLEncoding.EncodeToString(stateMAC(key, digest, exp))
}

// verifyState checks that state is one signed with key for digest and has not expired.
// An expiry more than requestStateTTL ahead is refused whatever the signature: the key
// is derived from the principal's token, so a holder of the token could sign any
// expiry, and no state dsh issues claims more.
func verifyState(key, digest []byte, state string, now time.Time) bool {
	exp, mac, ok := strings.Cut(state, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.After(time.Unix(unix, 0)) || time.Unix(unix, 0).After(now.Add(requestStateTTL+time.Second)) {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	return err == nil && hmac.Equal(got, stateMAC(key, digest, exp))
}

func stateMAC(key, digest []byte, exp string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(digest)
	m.Write([]byte(exp))
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
