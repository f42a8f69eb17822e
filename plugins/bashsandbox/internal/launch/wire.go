package launch

import "errors"

// wbuf builds a payload: unsigned varints, zigzag varints, length-prefixed strings.
type wbuf struct{ b []byte }

func (w *wbuf) uint(v uint64) {
	for v >= 0x80 {
		w.b = append(w.b, byte(v)|0x80)
		v >>= 7
	}
	w.b = append(w.b, byte(v))
}

func (w *wbuf) int(v int) { w.uint(uint64(v<<1) ^ uint64(v>>63)) }

func (w *wbuf) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *wbuf) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *wbuf) strs(ss []string) {
	w.uint(uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// rbuf reads a payload; the first error sticks and later reads return zero values.
type rbuf struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated message")

func (r *rbuf) kind(want byte) {
	if len(r.b) == 0 || r.b[0] != want {
		r.err = errors.New("unexpected message type")
		return
	}
	r.b = r.b[1:]
}

func (r *rbuf) uint() uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	for i := 0; i < 10; i++ {
		if i >= len(r.b) {
			r.err = errShort
			return 0
		}
		c := r.b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i == 9 && c > 1 {
				break
			}
			if c == 0 && i > 0 {
				r.err = errors.New("non-canonical varint")
				return 0
			}
			r.b = r.b[i+1:]
			return v
		}
	}
	r.err = errors.New("varint overflow")
	return 0
}

func (r *rbuf) int() int {
	u := r.uint()
	return int(int64(u>>1) ^ -int64(u&1))
}

func (r *rbuf) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 {
		r.err = errShort
		return false
	}
	c := r.b[0]
	r.b = r.b[1:]
	if c > 1 {
		r.err = errors.New("invalid boolean")
	}
	return c == 1
}

func (r *rbuf) str() string {
	n := r.uint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *rbuf) strs() []string {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) { // every string takes at least one byte
		r.err = errShort
		return nil
	}
	var out []string
	if n > 0 {
		out = make([]string, 0, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

func (r *rbuf) done(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return errors.New(what + ": " + r.err.Error())
	}
	return nil
}
