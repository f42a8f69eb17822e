package launch

import (
	"reflect"
	"syscall"
	"testing"
)

func TestMessagesRoundTrip(t *testing.T) {
	setup := Setup{
		Namespaces: true, Network: NetworkDeny, Hold: true, Workspace: "/w", WritableRoots: []string{"/a", "/b c"},
		TempDir: "/tmp/s/tmp", Stage: "/tmp/s/stage", MaskDirs: []string{"/h"}, Protect: []string{"/w/.git", "/w/.dsh"},
		Spill: "/h/dsh-spill-1-ab/s-x", MaskFiles: []string{"/home/u/.dsh/serve-token"}, ShowFiles: []string{"/home/u/.dsh/sessions/s-x.jsonl"},
	}
	got, err := DecodeSetup(setup.Encode())
	if err != nil || !reflect.DeepEqual(got, setup) {
		t.Fatalf("setup: %+v, %v", got, err)
	}
	start := Start{
		ID: 1<<63 + 5, Policy: Policy{Mode: ModeWorkspaceWrite, WorkspaceRoot: "/w", WritableRoots: []string{"/tmp"}, Network: NetworkAllow},
		Path: "/usr/bin/bash", Argv: []string{"bash", "-c", "echo \x00-free but \xff odd"}, Dir: "/w", Env: []string{"A=1", ""},
		Protect: nil, MaskFiles: []string{"/k"}, MaskDirs: []string{"/var/tmp/other"}, Cgroup: true, Terminal: true, Cols: 120, Rows: 40,
	}
	gotStart, err := DecodeStart(start.Encode())
	if err != nil || !reflect.DeepEqual(gotStart, start) {
		t.Fatalf("start: %+v, %v", gotStart, err)
	}
	for _, r := range []Reply{
		{Type: MsgReady},
		{Type: MsgStarted, ID: 7, Pid: 12},
		{Type: MsgStarted, ID: 10, Pid: 13, LaunchFailed: true},
		{Type: MsgFailed, ID: 8, Errno: 2, Op: "chdir", Path: "/x", Message: "m"},
		{Type: MsgExited, ID: 9, Code: -1, Signal: 15},
		{Type: MsgChecked, ID: 11, Errno: 13, Op: "create"},
	} {
		got, err := DecodeReply(r.Encode())
		if err != nil || got != r {
			t.Fatalf("reply %+v: %+v, %v", r, got, err)
		}
	}
	if got, err := DecodeRelease(Release{ID: 3}.Encode()); err != nil || got.ID != 3 {
		t.Fatalf("release: %+v, %v", got, err)
	}
	check := Check{ID: 4, Policy: Policy{Mode: ModeReadOnly, Network: NetworkDeny}, Dir: "/tmp"}
	if got, err := DecodeCheck(check.Encode()); err != nil || !reflect.DeepEqual(got, check) {
		t.Fatalf("check: %+v, %v", got, err)
	}
}

func TestMalformedMessages(t *testing.T) {
	full := (&Start{ID: 1, Path: "/p", Argv: []string{"a"}}).Encode()
	for name, b := range map[string][]byte{
		"empty":      nil,
		"wrong type": append([]byte{MsgSetup}, full[1:]...),
		"truncated":  full[:len(full)-1],
		"trailing":   append(append([]byte{}, full...), 0),
	} {
		if _, err := DecodeStart(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	for name, b := range map[string][]byte{
		"unterminated varint": {MsgRelease, 0x80},
		"varint too big":      {MsgRelease, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"non-canonical":       {MsgRelease, 0x81, 0x00},
	} {
		if _, err := DecodeRelease(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := DecodeReply([]byte{99}); err == nil {
		t.Error("unknown reply type decoded")
	}
	if _, err := DecodeSetup([]byte{MsgSetup, 2}); err == nil {
		t.Error("a boolean 2 decoded")
	}
}

// FuzzDecode: no input crashes a decoder, and what decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add((&Setup{Network: NetworkDeny, Protect: []string{"/x"}}).Encode())
	f.Add((&Start{ID: 1, Argv: []string{"bash", "-c", "true"}, Env: []string{"A=B"}}).Encode())
	f.Add((&Reply{Type: MsgExited, ID: 2, Code: 1}).Encode())
	f.Add(Release{ID: 9}.Encode())
	f.Add(Check{ID: 3, Policy: Policy{Mode: ModeReadOnly, Network: NetworkAllow}, Dir: "/tmp"}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := DecodeSetup(b); err == nil && !reflect.DeepEqual(m.Encode(), b) {
			t.Fatalf("setup %+v re-encodes differently", m)
		}
		if m, err := DecodeStart(b); err == nil && !reflect.DeepEqual(m.Encode(), b) {
			t.Fatalf("start %+v re-encodes differently", m)
		}
		if m, err := DecodeReply(b); err == nil && !reflect.DeepEqual(m.Encode(), b) {
			t.Fatalf("reply %+v re-encodes differently", m)
		}
		if m, err := DecodeRelease(b); err == nil && !reflect.DeepEqual(m.Encode(), b) {
			t.Fatalf("release %+v re-encodes differently", m)
		}
		if m, err := DecodeCheck(b); err == nil && !reflect.DeepEqual(m.Encode(), b) {
			t.Fatalf("check %+v re-encodes differently", m)
		}
	})
}

// Frames and descriptors over a real socket pair: a large frame arrives whole, the
// descriptors with their own frame, close-on-exec; the end of the stream is ErrClosed.
func TestConnFrames(t *testing.T) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewConn(pair[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewConn(pair[1])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i)
	}
	var pipe [2]int
	if err := syscall.Pipe2(pipe[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(pipe[0])
	defer syscall.Close(pipe[1])
	sent := make(chan error, 1)
	go func() {
		if err := a.Send([]byte("first"), pipe[1]); err != nil {
			sent <- err
			return
		}
		if err := a.Send(big); err != nil {
			sent <- err
			return
		}
		sent <- a.Close()
	}()
	p, fds, err := b.Recv()
	if err != nil || string(p) != "first" || len(fds) != 1 {
		t.Fatalf("first frame: %q, %v, %v", p, fds, err)
	}
	flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[0]), syscall.F_GETFD, 0)
	if e != 0 || flags&syscall.FD_CLOEXEC == 0 {
		t.Errorf("received descriptor flags %#x, %v: not close-on-exec", flags, e)
	}
	if _, err := syscall.Write(fds[0], []byte("x")); err != nil {
		t.Errorf("the received descriptor is not the pipe: %v", err)
	}
	syscall.Close(fds[0])
	p, fds, err = b.Recv()
	if err != nil || !reflect.DeepEqual(p, big) || len(fds) != 0 {
		t.Fatalf("large frame: %d bytes, %v, %v", len(p), fds, err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Recv(); err != ErrClosed {
		t.Fatalf("after the peer closed: %v", err)
	}
}
