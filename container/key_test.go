package container_test

import (
	"fmt"
	"testing"

	"github.com/dsh-dev/dsh/container"
)

// Two declarations that give one service name different value types cannot be in one
// catalog: the mismatch would otherwise surface only when a consumer applies.
func TestCatalogRefusesKeysOfOneNameWithTwoTypes(t *testing.T) {
	j := &journal{}
	other := container.Define(container.Declaration[container.NoConfig]{Name: "b", Inject: container.Keys{container.NewKey[fmt.Stringer]("x")},
		Apply: func(*container.Activation, container.NoConfig) error { return nil }})
	_, err := container.NewCatalog(plug(j, "a", nil, []string{"x"}, nil), other)
	wantErrContains(t, err, `catalog: service "x" is declared as *containertest.Svc by "a" and as fmt.Stringer by "b"`)

	unnamed := container.Define(container.Declaration[container.NoConfig]{Name: "c", Provide: container.Keys{container.Key[int]{}},
		Apply: func(*container.Activation, container.NoConfig) error { return nil }})
	_, err = container.NewCatalog(unnamed)
	wantErrContains(t, err, `catalog: plugin "c" declares a service key without a name`)
}

// Lookup through a key of another type (a view of the service through an interface)
// finds the service only when its value has that type.
func TestLookupThroughAView(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t, plug(j, "p", nil, []string{"x"}, nil))
	mustNil(t, rt.Compose("p", []container.Row{{ID: "p", Plugin: "p"}}))
	if v, ok := container.Lookup(rt, key("x")); !ok || v.Row != "p" {
		t.Fatalf("typed lookup: %+v %v", v, ok)
	}
	if _, ok := container.Lookup(rt, container.NewKey[fmt.Stringer]("x")); ok {
		t.Fatal("a *svc was found as a fmt.Stringer")
	}
	if v, ok := container.Lookup(rt, container.NewKey[any]("x")); !ok || v.(*svc).Row != "p" {
		t.Fatalf("lookup as any: %v %v", v, ok)
	}
}
