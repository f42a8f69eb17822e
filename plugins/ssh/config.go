package ssh

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/proc"
)

// Name is the plugin's catalog name, also the prefix of its error messages.
const Name = "ssh"

// Config is the ssh row's configuration.
type Config struct {
	// Address is the remote host as host:port, or a host alone for port 22 (required).
	Address string `yaml:"address"`
	// User is the remote login name (default: the local user).
	User string `yaml:"user"`
	// IdentityFile is the unencrypted private key to log in with (default
	// ~/.ssh/id_ed25519, else ~/.ssh/id_rsa). A leading ~/ is the local home.
	IdentityFile string `yaml:"identityFile"`
	// KnownHostsFile lists the trusted host keys (default ~/.ssh/known_hosts). Host keys
	// are checked strictly: a host it does not list, or lists with another key, is
	// refused.
	KnownHostsFile string `yaml:"knownHostsFile"`
	// KeepaliveMs is the interval of keepalive requests on each connection; a
	// connection that leaves one unanswered for three intervals is closed as lost.
	KeepaliveMs float64 `yaml:"keepaliveMs" valid:"a positive finite number"`
	// MaxConnections bounds the connections to the host; commands are spread over them.
	MaxConnections float64 `yaml:"maxConnections" valid:"an integer from 1 to 64"`
	// SpillRoot is where the private directory of the remote commands' spill files is
	// created, on this machine (default: the system temp directory).
	SpillRoot string `yaml:"spillRoot"`
	// SpillBudgetBytes bounds the total size of those spill files (default 1 GiB).
	SpillBudgetBytes int64 `yaml:"spillBudgetBytes" valid:"a positive integer"`
}

// DefaultConfig returns the configuration with its defaults (address unset).
func DefaultConfig() *Config {
	return &Config{KeepaliveMs: 15000, MaxConnections: 4, SpillBudgetBytes: proc.DefaultSpillBudgetBytes}
}

// Validate checks every key; messages start with the key (the container prefixes them
// with "ssh: ").
func (c *Config) Validate() error {
	if c.Address == "" {
		return errors.New("address is required (host:port)")
	}
	host, port, err := net.SplitHostPort(withDefaultPort(c.Address))
	if err != nil || host == "" {
		return fmt.Errorf("address must be host:port, got %q", c.Address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address must be host:port with a port from 1 to 65535, got %q", c.Address)
	}
	if strings.ContainsAny(c.User, "\x00\n") {
		return fmt.Errorf("user must be a login name, got %q", c.User)
	}
	if k := c.KeepaliveMs; math.IsNaN(k) || math.IsInf(k, 0) || k <= 0 {
		return errors.New("keepaliveMs must be a positive finite number")
	}
	if m := c.MaxConnections; m != math.Trunc(m) || m < 1 || m > 64 {
		return errors.New("maxConnections must be an integer from 1 to 64")
	}
	if c.SpillBudgetBytes <= 0 {
		return fmt.Errorf("spillBudgetBytes must be a positive integer, got %d", c.SpillBudgetBytes)
	}
	return nil
}

// defaultPort is the port of an address that names none, as for ssh(1).
const defaultPort = "22"

// withDefaultPort is address with port 22 when it names a host alone ("build-1",
// "127.0.0.1", "::1", "[::1]"); anything else is returned as it is, for Validate to judge.
func withDefaultPort(address string) string {
	if _, _, err := net.SplitHostPort(address); err == nil {
		return address
	}
	host := strings.TrimSuffix(strings.TrimPrefix(address, "["), "]")
	if host == "" || strings.ContainsAny(host, "[]/@ ") {
		return address
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return address // "h:ssh", "h:" and the like: a port that is not one
	}
	return net.JoinHostPort(host, defaultPort)
}

// settings is a validated Config with its defaults resolved against the local machine.
type settings struct {
	address        string
	user           string
	identityFile   string
	knownHostsFile string
	keepaliveMs    int64
	maxConns       int
}

// resolve applies the defaults that depend on the local machine: the user, the key and
// the known_hosts file.
func (c *Config) resolve() (settings, error) {
	s := settings{
		address:     withDefaultPort(c.Address),
		user:        c.User,
		keepaliveMs: int64(math.Ceil(min(c.KeepaliveMs, math.MaxInt32))),
		maxConns:    int(c.MaxConnections),
	}
	if s.user == "" {
		u, err := user.Current()
		if err != nil {
			return s, fmt.Errorf("ssh: user: cannot tell the local user: %w", err)
		}
		s.user = u.Username
	}
	home := func() (string, error) {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("the local home directory is unknown: %w", err)
		}
		return h, nil
	}
	expand := func(key, p string) (string, error) {
		if p == "~" || strings.HasPrefix(p, "~/") {
			h, err := home()
			if err != nil {
				return "", fmt.Errorf("ssh: %s: %w", key, err)
			}
			p = filepath.Join(h, p[1:])
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("ssh: %s: %w", key, err)
		}
		return abs, nil
	}
	var err error
	switch c.IdentityFile {
	case "":
		h, herr := home()
		if herr != nil {
			return s, fmt.Errorf("ssh: identityFile: %w", herr)
		}
		for _, name := range []string{"id_ed25519", "id_rsa"} {
			p := filepath.Join(h, ".ssh", name)
			if _, serr := os.Stat(p); serr == nil {
				s.identityFile = p
				break
			}
		}
		if s.identityFile == "" {
			return s, fmt.Errorf("ssh: identityFile: neither %s nor %s exists; set identityFile", filepath.Join(h, ".ssh", "id_ed25519"), filepath.Join(h, ".ssh", "id_rsa"))
		}
	default:
		if s.identityFile, err = expand("identityFile", c.IdentityFile); err != nil {
			return s, err
		}
	}
	kh := c.KnownHostsFile
	if kh == "" {
		kh = "~/.ssh/known_hosts"
	}
	if s.knownHostsFile, err = expand("knownHostsFile", kh); err != nil {
		return s, err
	}
	return s, nil
}
