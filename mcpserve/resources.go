package mcpserve

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP resources dsh serves.
const (
	// statusURI is the live composition status (the JSON of `dsh status --json`).
	statusURI = "dsh://status"
	// noticesURI is the calling harness session's job notices, newest last.
	noticesURI = "dsh://notices"
)

// noticeMetaKey carries the notice text in the _meta of the resources/updated
// notification that announces it, so a client need not read the resource to show it.
const noticeMetaKey = "dev.dsh/notice"

// addResources serves dsh://status and dsh://notices on sc.
func (s *Server) addResources(sc *scope) {
	sc.server.AddResource(&mcp.Resource{
		URI: statusURI, Name: "status", MIMEType: "application/json",
		Description: "Live state of every profile row: state, missing services, providers, errors, and the last reload error.",
	}, s.readStatus)
	sc.server.AddResource(&mcp.Resource{
		URI: noticesURI, Name: "notices", MIMEType: "application/json",
		Description: "Your background-job notices ({\"notices\": [{seq, time, text}]}, newest last). Subscribe to it to be told when a job finishes; the update carries the notice text in _meta[\"" + noticeMetaKey + "\"].",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return s.readNotices(sc, req)
	})
}

func (s *Server) readStatus(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	data, err := json.MarshalIndent(s.rt.Status(), "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: statusURI, MIMEType: "application/json", Text: string(data)}}}, nil
}

// announceStatus tells the subscribers of dsh://status on every scope that it changed.
func (s *Server) announceStatus(scopes []*scope) {
	for _, sc := range scopes {
		if err := sc.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: statusURI}); err != nil {
			s.log.Debug("status resource update not sent", "err", err)
		}
	}
}

func (s *Server) readNotices(sc *scope, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var log *noticeLog
	if sc.principal != nil {
		log = sc.principal.notices
	} else {
		session := s.session(sc, req)
		s.mu.Lock()
		log = s.notices[session.ID]
		s.mu.Unlock()
	}
	data, err := json.Marshal(struct {
		Notices []notice `json:"notices"`
	}{log.all()})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: noticesURI, MIMEType: "application/json", Text: string(data)}}}, nil
}
