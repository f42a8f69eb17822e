package container

import (
	"fmt"
	"reflect"
)

// Key is the typed name of a service: the name that status, profiles' errors and the
// runtime use, and the Go type of the value published under it. The package that
// defines a service declares its key once, and providers and consumers share it:
//
//	var Service = container.NewKey[*Registry]("tools")
//
// Key.Provide accepts only a T; Injected and Lookup return a T. A value of
// the wrong type is a compile error, not a failed Apply.
type Key[T any] struct{ name string }

// NewKey returns the key of the service name, whose values are T.
func NewKey[T any](name string) Key[T] { return Key[T]{name: name} }

// Name is the service's name, as status and error texts show it.
func (k Key[T]) Name() string { return k.name }

// String is the service's name.
func (k Key[T]) String() string { return k.name }

func (k Key[T]) valueType() reflect.Type { return reflect.TypeFor[T]() }

// AnyKey is a Key of any value type: what a declaration lists in Inject, Provide and
// Exclusive. Only Key implements it.
type AnyKey interface {
	Name() string
	valueType() reflect.Type
}

// Keys lists services, e.g. container.Keys{tools.Service, shell.Service}.
type Keys []AnyKey

func (ks Keys) names() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		if k != nil {
			out[i] = k.Name()
		}
	}
	return out
}

// Provide publishes value as this service for when the activation's Apply returns
// successfully: `return shell.Service.Provide(a, ex)`. The service must be in the
// plugin's Provide list, and Provide is only valid while Apply runs. (It is a method of
// the key, not a function, so that T comes from the key alone: a value whose type
// implements an interface key is accepted as it is.)
func (k Key[T]) Provide(a *Activation, value T) error {
	return a.provide(k.name, value)
}

// Injected returns the service key that a's plugin injects. It is how Apply gets what
// its plugin declared in Inject: the service exists for as long as the activation
// lasts (when its provider goes away, this activation ends first). Asking for a service
// the plugin does not inject is an error.
func Injected[T any](a *Activation, key Key[T]) (T, error) {
	var zero T
	v, err := a.service(key.name)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok { // only a provider declaring another type under the same name; NewCatalog refuses that
		return zero, fmt.Errorf("%s: injected service %q is %T, want %v", a.fiber.plugin.Name, key.name, v, reflect.TypeFor[T]())
	}
	return t, nil
}

// Services is where Lookup looks: a *Runtime (for code outside plugins: the CLI, tests)
// or an *Activation (for a plugin at call time).
type Services interface {
	lookup(name string) (any, bool)
}

// Lookup returns the service key currently provided, if it exists. Plugins use it at
// call time for services they use without injecting them (jobs, approval), which may
// come and go; Injected is for the ones they inject. A key may also view a service
// through an interface its value implements (NewKey[io.Closer]("ssh")): ok is then
// false when the value does not implement it.
func Lookup[T any](from Services, key Key[T]) (T, bool) {
	var zero T
	v, ok := from.lookup(key.name)
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}
