package cli

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
)

// checkAddr refuses a non-loopback address unless remote serving is allowed. A host
// name counts as loopback when every address it resolves to is.
func checkAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Errorf("--http %q: %w", addr, err)}
	}
	if allowRemote || loopbackHost(host) {
		return nil
	}
	return refusal{fmt.Errorf("refusing to serve on non-loopback address %s without --allow-remote", addr)}
}

func loopbackHost(host string) bool {
	if host == "" {
		return false // every interface
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "localhost" {
		return true
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// loadTokens returns the bearer tokens: the lines of file (readTokenFile), or, without
// one, the token in home/serve-token (homeToken).
func loadTokens(file, home string, stderr io.Writer) ([]tokenLine, error) {
	if file != "" {
		return readTokenFile(file)
	}
	tokens, err := homeToken(home, stderr)
	if err != nil {
		return nil, err
	}
	return []tokenLine{{token: tokens[0]}}, nil
}

// homeToken returns the token in home/serve-token, announced on stderr: the one there
// when the file holds a token dsh could have generated, private to this user — so that
// the clients configured with it keep working across restarts, and a second `dsh serve
// --http` shares it rather than replacing it — else a new one (32 random bytes,
// base64url) written there 0600. Of two that start at once, the first to write wins and
// the other reads its token.
func homeToken(home string, stderr io.Writer) ([]string, error) {
	path := filepath.Join(home, bashsandbox.ServeTokenName)
	announce := func(verb, token string) []string {
		fmt.Fprintf(stderr, "dsh: %s bearer token in %s (clients send \"Authorization: Bearer <token>\"; --token-file sets your own)\n", verb, path)
		return []string{token}
	}
	if token, ok := reusableToken(path); ok {
		return announce("using the", token), nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	_, statErr := os.Lstat(path)
	replace := statErr == nil // a file there that is not a reusable token…
	if replace {
		// …unless it is another start's, written since the first look: a token file
		// never stops being reusable, so one that is not now is a file to replace.
		if theirs, ok := reusableToken(path); ok {
			return announce("using the", theirs), nil
		}
	}
	if err := writePrivate(path, token+"\n", replace); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if theirs, ok := reusableToken(path); ok {
				return announce("using the", theirs), nil
			}
		}
		return nil, fmt.Errorf("writing the bearer token: %w", err)
	}
	return announce("generated a", token), nil
}

// reusableToken returns the token in the file at path if it is one dsh could have
// generated and only this user can read: a regular file (not a link) of this user's,
// without group or other permissions, holding one base64url token of at least 32 bytes.
func reusableToken(path string) (string, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || fi.Size() > 1024 {
		return "", false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return "", false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	token := strings.TrimSpace(string(data))
	if !generatedToken(token) {
		return "", false
	}
	return token, true
}

// generatedToken reports whether token has the shape of one homeToken could have
// written: 43 to 256 characters of base64url. (Not a regexp: compiling {43,256} at
// start-up cost every dsh about a millisecond.)
func generatedToken(token string) bool {
	if len(token) < 43 || len(token) > 256 {
		return false
	}
	for _, c := range []byte(token) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// writePrivate writes data to path, readable by its owner only, atomically: it replaces
// what is there when replace is set, and otherwise fails with fs.ErrExist if path exists.
func writePrivate(path, data string, replace bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".serve-token-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !replace {
		// Link fails if path exists: it never replaces another start's token.
		if err := os.Link(f.Name(), path); err == nil || errors.Is(err, fs.ErrExist) {
			return err
		}
		// A file system without hard links: rename (another start's token written since
		// the check would be replaced; each then serves its own).
	}
	return os.Rename(f.Name(), path)
}

// dshHome is the harness home: the shell-env service's, else $DSH_HOME, else ~/.dsh.
func dshHome(rt *container.Runtime) string {
	if env, ok := container.Lookup(rt, shellenv.Service); ok && env.Home() != "" {
		return env.Home()
	}
	return shellenv.DefaultConfig().DshHome
}
