package container_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
)

// ComposeChanges says which rows a composition mounted, restarted and disposed;
// RecordReload puts a reload's outcome in the status.
func TestComposeChangesAndLastReload(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t, plug(j, "a", nil, []string{"a"}, nil), plug(j, "b", []string{"a"}, nil, nil), plug(j, "c", nil, nil, nil))
	c, err := rt.ComposeChanges("p", nil, []container.Row{{ID: "a", Plugin: "a"}, {ID: "b", Plugin: "b"}, {ID: "c", Plugin: "c"}})
	mustNil(t, err)
	if !slices.Equal(c.Mounted, []string{"a", "b", "c"}) || len(c.Restarted) != 0 || len(c.Disposed) != 0 {
		t.Errorf("first composition: %+v", c)
	}
	c, err = rt.ComposeChanges("p", nil, []container.Row{
		{ID: "a", Plugin: "a", Config: map[string]any{"value": "new"}}, // restarted
		{ID: "b", Plugin: "b"}, // restarted too: it injects a
		{ID: "d", Plugin: "c"}, // mounted
	}) // c disposed
	mustNil(t, err)
	if !slices.Equal(c.Mounted, []string{"d"}) || !slices.Equal(c.Restarted, []string{"a", "b"}) || !slices.Equal(c.Disposed, []string{"c"}) {
		t.Errorf("second composition: %+v", c)
	}
	c, err = rt.ComposeChanges("p", nil, []container.Row{{ID: "b", Plugin: "b"}, {ID: "d", Plugin: "c"}})
	mustNil(t, err)
	// b's provider went: its activation ended (it is pending now, which its state says).
	if len(c.Mounted) != 0 || !slices.Equal(c.Restarted, []string{"b"}) || !slices.Equal(c.Disposed, []string{"a"}) {
		t.Errorf("third composition: %+v", c)
	}
	wantState(t, rt, "b", container.StatePending)
	if _, err := rt.ComposeChanges("p", nil, []container.Row{{ID: "x", Plugin: "nope"}}); err == nil {
		t.Fatal("an unknown plugin composed")
	}

	if st := rt.Status(); st.LastReload != nil {
		t.Errorf("last reload before any: %+v", st.LastReload)
	}
	at := time.Now()
	rt.RecordReload(container.Reload{At: at, Result: container.ReloadApplied, Changes: c})
	data, _ := json.Marshal(rt.Status())
	var st struct {
		LastReloadError string
		LastReload      map[string]any
	}
	mustNil(t, json.Unmarshal(data, &st))
	if st.LastReload["result"] != "applied" || st.LastReload["at"] != at.Format(time.RFC3339Nano) || len(st.LastReload) != 6 ||
		!slices.Equal(st.LastReload["restarted"].([]any), []any{"b"}) || st.LastReloadError != "" {
		t.Errorf("status after a reload: %s", data)
	}
	rt.RecordReload(container.Reload{At: at, Result: container.ReloadFailed, Error: errors.New("bad edit").Error()})
	if s := rt.Status(); s.LastReload.Result != "failed" || s.LastReloadError != "bad edit" || s.LastReload.Mounted == nil {
		t.Errorf("status after a failed reload: %+v, %q", s.LastReload, s.LastReloadError)
	}
}
