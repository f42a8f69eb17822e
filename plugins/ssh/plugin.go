package ssh

import (
	"context"
	"errors"
	"time"

	"github.com/dsh-dev/dsh/container"
)

// Service is the key the Host is provided under.
var Service = container.NewKey[*Host]("ssh")

// Plugin declares the ssh service. Its activation owns one Host: it connects once (an
// untrusted host key or a refused login fails the activation), reports the connection
// state as the row's status detail, and closes the Host when it ends, which kills every
// remote command still running. Executor reloads never touch it.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:    Name,
	Provide: container.Keys{Service},
	Config:  DefaultConfig,
	Apply: func(a *container.Activation, cfg *Config) error {
		h, err := New(cfg, Options{Logger: a.Logger(), OnState: a.SetDetail})
		if err != nil {
			return err
		}
		// A host that does not answer at all is not a configuration error: after a
		// while the row activates and the dial goes on in the background.
		cctx, cancel := context.WithTimeoutCause(a.Context(), activationWait, errSlowHost)
		defer cancel()
		if err := h.Connect(cctx); err != nil && !errors.Is(err, errSlowHost) {
			h.Close()
			return err
		}
		a.Defer(h.Close)
		a.OnSessionEnd(h.EndSession)
		return Service.Provide(a, h)
	},
})

// activationWait bounds how long activation waits for the first connection.
const activationWait = 10 * time.Second

var errSlowHost = errors.New("the host has not answered yet; still connecting in the background")

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)
