package cli

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

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
// one, a new token written 0600 to home/serve-token (and announced on stderr).
func loadTokens(file, home string, stderr io.Writer) ([]tokenLine, error) {
	if file != "" {
		return readTokenFile(file)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	path := filepath.Join(home, bashsandbox.ServeTokenName)
	if err := writePrivate(path, token+"\n"); err != nil {
		return nil, fmt.Errorf("writing the bearer token: %w", err)
	}
	fmt.Fprintf(stderr, "dsh: generated a bearer token in %s (clients send \"Authorization: Bearer <token>\"; --token-file sets your own)\n", path)
	return []tokenLine{{token: token}}, nil
}

// writePrivate replaces path with data, readable by its owner only, atomically.
func writePrivate(path, data string) error {
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
	return os.Rename(f.Name(), path)
}

// dshHome is the harness home: the shell-env service's, else $DSH_HOME, else ~/.dsh.
func dshHome(rt *container.Runtime) string {
	if env, ok := container.Lookup(rt, shellenv.Service); ok && env.Home() != "" {
		return env.Home()
	}
	return shellenv.DefaultConfig().DshHome
}
