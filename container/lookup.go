package container

// LookupService returns the service currently provided under name if it exists and is a T.
func LookupService[T any](r *Runtime, name string) (T, bool) {
	var zero T
	v, ok := r.Lookup(name)
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}
