package mcpserve

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifyTimeout bounds the delivery of one notice.
const notifyTimeout = 10 * time.Second

// maxNotices bounds a noticeLog.
const maxNotices = 100

// noticeLog keeps a harness session's last notices.
type noticeLog struct {
	mu      sync.Mutex
	seq     int
	entries []notice
}

type notice struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

func (l *noticeLog) add(text string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.entries = append(l.entries, notice{Seq: l.seq, Time: time.Now().UTC(), Text: text})
	if len(l.entries) > maxNotices {
		l.entries = append([]notice(nil), l.entries[len(l.entries)-maxNotices:]...)
	}
}

func (l *noticeLog) all() []notice {
	if l == nil {
		return []notice{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]notice{}, l.entries...)
}

// announceNotice tells sc's subscribers of noticesURI that text was added. Only a scope
// whose sessions all belong to one harness session may announce (a principal's, or
// stdio's): resources/updated goes to every subscriber of the URI on the server.
func announceNotice(sc *scope, text string) {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	_ = sc.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: noticesURI, Meta: mcp.Meta{noticeMetaKey: text}})
}

// sessionNotifier delivers an MCP session's notices: a log notification (logger
// dsh.jobs, level info) for a session-lane client; for a stateless-revision client on
// stdio, the notice is announced on dsh://notices (subscriptions/listen).
type sessionNotifier struct {
	sc  *scope
	ss  *mcp.ServerSession
	log *noticeLog
}

// Notify records the notice and sends it in the background with a deadline: a client
// that stops reading must not hold up the job runtime that reports the completion.
func (n sessionNotifier) Notify(text string) {
	n.log.add(text)
	go func() {
		if p := n.ss.InitializeParams(); p != nil && isStateless(p.ProtocolVersion) {
			announceNotice(n.sc, text)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		_ = n.ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "dsh.jobs", Data: text})
	}()
}

// principalNotifier delivers a principal's notices through its dsh://notices resource.
type principalNotifier struct{ p *principal }

func (n principalNotifier) Notify(text string) {
	n.p.notices.add(text)
	if sc := n.p.scope; sc != nil {
		go announceNotice(sc, text)
	}
}
