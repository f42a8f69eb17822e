package mcpserve

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

func verifyState(key, digest []byte, state string, now time.Time) bool {
	exp, mac, ok := strings.Cut(state, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.After(time.Unix(unix, 0)) {
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
