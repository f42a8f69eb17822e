package cli

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// approvalInputKey names dsh's approval question in input_required results.
const approvalInputKey = "approval"

// requestStateTTL bounds how long a client may take to answer an approval question.
const requestStateTTL = 15 * time.Minute

// inputAsker is the Prompter of one stateless-revision tools/call: the revision has no
// server-to-client requests, so a question ends the call with an input_required result
// (an elicitation with the question and an empty schema) and the client retries the
// call with the user's answer and the signed request state, which binds the answer to
// this principal, tool and arguments. The first question of the retry gets that answer.
type inputAsker struct {
	state string // for the input_required result: signs the call

	mu       sync.Mutex
	answer   *mcp.ElicitResult // from the retry; used once
	question string            // asked and not answered: the call needs input
}

// newAsker prepares the prompter of req, checking the answer a retry carries. A retry
// whose request state is not one dsh signed for this very call is an error.
func (b *bridge) newAsker(sc *scope, session *container.Session, req *mcp.CallToolRequest) (*inputAsker, error) {
	key := b.stateKey
	if sc.principal != nil {
		key = sc.principal.stateKey
	}
	digest, err := callDigest(session.ID, req.Params.Name, req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	a := &inputAsker{state: signState(key, digest, time.Now().Add(requestStateTTL))}
	if req.Params.RequestState == "" && len(req.Params.InputResponses) == 0 {
		return a, nil
	}
	if !verifyState(key, digest, req.Params.RequestState, time.Now()) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState is invalid or expired for this call: call the tool again without inputResponses"}
	}
	if r, ok := req.Params.InputResponses[approvalInputKey].(*mcp.ElicitResult); ok {
		a.answer = r
	}
	return a, nil
}

func (a *inputAsker) Confirm(_ context.Context, message string) (container.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answer != nil {
		res := a.answer
		a.answer = nil
		return answerOf(res)
	}
	a.question = message
	return "", approval.ErrDeferred
}

// inputRequired is the result that puts the pending question to the client.
func (a *inputAsker) inputRequired() *mcp.CallToolResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approvalInputKey: &mcp.ElicitParams{
			Mode:            "form",
			Message:         a.question,
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		}},
		RequestState: a.state,
	}
}

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

// progressInterval is how often a call with a progress token is reported on.
const progressInterval = 5 * time.Second

// reportProgress sends notifications/progress for token every progressInterval until the
// returned function is called (it returns once no more can be sent): progress = seconds
// elapsed, message "running 12s, 3.1 MB of output" (the output part when the tool
// reports it).
func reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, meter *tools.Meter) (done func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			elapsed := math.Floor(time.Since(start).Seconds())
			msg := fmt.Sprintf("running %.0fs", elapsed)
			if n, ok := meter.Bytes(); ok {
				msg += ", " + formatBytes(n) + " of output"
			}
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: elapsed, Message: msg})
		}
	}()
	return func() {
		cancel()
		<-finished
	}
}

// formatBytes renders n in decimal units: "812 bytes", "12.3 kB", "3.1 MB", "1.0 GB".
func formatBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}
