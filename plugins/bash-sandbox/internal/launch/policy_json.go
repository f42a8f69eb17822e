package launch

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodePolicy parses one JSON object into a Policy, as strictly as encoding/json with
// DisallowUnknownFields and no trailing data, and with the same results on what it
// accepts (it is fuzzed against encoding/json): keys must match exactly (encoding/json
// also takes other letter cases), a repeated key's last value wins, null leaves a field
// empty, invalid UTF-8 and lone surrogates in strings become U+FFFD. Syntax errors are
// reported before any other, then the first unknown key or mistyped value.
func DecodePolicy(s string) (Policy, error) {
	d := &jsonDecoder{s: s}
	d.space()
	if err := d.skipValue(0); err != nil {
		return Policy{}, err
	}
	d.space()
	if d.i < len(d.s) {
		return Policy{}, errors.New("trailing data after the JSON object")
	}
	d.i = 0
	d.space()
	if d.s[d.i] != '{' {
		return Policy{}, errors.New("json: cannot unmarshal " + d.kind() + " into Go value of type launch.Policy")
	}
	var p Policy
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	d.i++ // the syntax is known to be valid from here on
	d.space()
	if d.s[d.i] == '}' {
		return p, nil
	}
	for {
		d.space()
		key := d.str()
		d.space()
		d.i++ // ':'
		d.space()
		switch key {
		case "mode":
			d.stringField(&p.Mode, key, fail)
		case "workspaceRoot":
			d.stringField(&p.WorkspaceRoot, key, fail)
		case "network":
			d.stringField(&p.Network, key, fail)
		case "writableRoots":
			switch d.s[d.i] {
			case 'n':
				d.i += 4
				p.WritableRoots = nil
			case '[':
				d.i++
				roots := []string{}
				d.space()
				if d.s[d.i] == ']' {
					d.i++
				} else {
					for {
						d.space()
						var root string
						d.stringField(&root, key, fail)
						roots = append(roots, root)
						d.space()
						c := d.s[d.i]
						d.i++
						if c == ']' {
							break
						}
					}
				}
				p.WritableRoots = roots
			default:
				fail(errors.New("json: cannot unmarshal " + d.kind() + " into Go struct field Policy.writableRoots of type []string"))
				d.skipValue(0)
			}
		default:
			fail(errors.New("json: unknown field " + strconv.Quote(key)))
			d.skipValue(0)
		}
		d.space()
		c := d.s[d.i]
		d.i++
		if c == '}' {
			break
		}
	}
	if firstErr != nil {
		return Policy{}, firstErr
	}
	return p, nil
}

// maxDepth bounds nesting (encoding/json's limit).
const maxDepth = 10000

type jsonDecoder struct {
	s string
	i int
}

func (d *jsonDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// separator consumes what follows an object member or array element: a comma (more to
// come) or closer (done). where names the position for a syntax error.
func (d *jsonDecoder) separator(closer byte, where string) (done bool, err error) {
	d.space()
	if d.i >= len(d.s) {
		return false, errEOF
	}
	switch d.s[d.i] {
	case ',':
		d.i++
		return false, nil
	case closer:
		d.i++
		return true, nil
	}
	return false, syntaxError(d.s[d.i], where)
}

// kind names the JSON value at d.i the way encoding/json's type errors do.
func (d *jsonDecoder) kind() string {
	switch d.s[d.i] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// stringField decodes the value at d.i into *dst: a string, or null (no change).
func (d *jsonDecoder) stringField(dst *string, key string, fail func(error)) {
	switch d.s[d.i] {
	case '"':
		*dst = d.str()
	case 'n':
		d.i += 4
	default:
		fail(errors.New("json: cannot unmarshal " + d.kind() + " into Go struct field Policy." + key + " of type string"))
		d.skipValue(0)
	}
}

func syntaxError(c byte, context string) error {
	return errors.New("invalid character " + quoteChar(c) + " " + context)
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	if c >= utf8.RuneSelf {
		s = strconv.Quote(string([]byte{c}))
	}
	return "'" + s[1:len(s)-1] + "'"
}

var errEOF = errors.New("unexpected EOF")

// skipValue checks the syntax of the value at d.i and moves past it.
func (d *jsonDecoder) skipValue(depth int) error {
	if d.i >= len(d.s) {
		return errEOF
	}
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	switch c := d.s[d.i]; {
	case c == '{':
		d.i++
		d.space()
		if d.i >= len(d.s) {
			return errEOF
		}
		if d.s[d.i] == '}' {
			d.i++
			return nil
		}
		for {
			d.space()
			if d.i >= len(d.s) {
				return errEOF
			}
			if d.s[d.i] != '"' {
				return syntaxError(d.s[d.i], "looking for beginning of object key string")
			}
			if err := d.skipString(); err != nil {
				return err
			}
			d.space()
			if d.i >= len(d.s) {
				return errEOF
			}
			if d.s[d.i] != ':' {
				return syntaxError(d.s[d.i], "after object key")
			}
			d.i++
			d.space()
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := d.separator('}', "after object key:value pair"); done || err != nil {
				return err
			}
		}
	case c == '[':
		d.i++
		d.space()
		if d.i >= len(d.s) {
			return errEOF
		}
		if d.s[d.i] == ']' {
			d.i++
			return nil
		}
		for {
			d.space()
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := d.separator(']', "after array element"); done || err != nil {
				return err
			}
		}
	case c == '"':
		return d.skipString()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	default:
		return syntaxError(c, "looking for beginning of value")
	}
}

func (d *jsonDecoder) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if d.i >= len(d.s) {
			return errEOF
		}
		if d.s[d.i] != word[k] {
			return syntaxError(d.s[d.i], "in literal "+word+" (expecting "+quoteChar(word[k])+")")
		}
		d.i++
	}
	return nil
}

func (d *jsonDecoder) digits() int {
	n := 0
	for d.i < len(d.s) && '0' <= d.s[d.i] && d.s[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

func (d *jsonDecoder) number() error {
	if d.s[d.i] == '-' {
		d.i++
		if d.i >= len(d.s) {
			return errEOF
		}
		if c := d.s[d.i]; c < '0' || c > '9' {
			return syntaxError(c, "in numeric literal")
		}
	}
	if d.s[d.i] == '0' {
		d.i++
	} else {
		d.digits()
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if d.i >= len(d.s) {
			return errEOF
		}
		if d.digits() == 0 {
			return syntaxError(d.s[d.i], "after decimal point in numeric literal")
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if d.i >= len(d.s) {
			return errEOF
		}
		if d.digits() == 0 {
			return syntaxError(d.s[d.i], "in exponent of numeric literal")
		}
	}
	return nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipString checks the syntax of the string at d.i (which is '"') and moves past it.
func (d *jsonDecoder) skipString() error {
	d.i++
	for {
		if d.i >= len(d.s) {
			return errEOF
		}
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return nil
		case c == '\\':
			d.i++
			if d.i >= len(d.s) {
				return errEOF
			}
			switch d.s[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				d.i++
				for k := 0; k < 4; k++ {
					if d.i >= len(d.s) {
						return errEOF
					}
					if !isHex(d.s[d.i]) {
						return syntaxError(d.s[d.i], "in \\u hexadecimal character escape")
					}
					d.i++
				}
			default:
				return syntaxError(d.s[d.i], "in string escape code")
			}
		case c < 0x20:
			return syntaxError(c, "in string literal")
		default:
			d.i++
		}
	}
}

func isHex4(s string) bool {
	return isHex(s[0]) && isHex(s[1]) && isHex(s[2]) && isHex(s[3])
}

func hex4(s string) rune {
	var r rune
	for k := 0; k < 4; k++ {
		c := s[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// str decodes the (syntactically valid) string at d.i and moves past it.
func (d *jsonDecoder) str() string {
	d.i++
	var out []byte
	for {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out)
		case c == '\\':
			d.i++
			e := d.s[d.i]
			d.i++
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(d.s[d.i:])
				d.i += 4
				if utf16.IsSurrogate(r) {
					// A valid pair is one rune; anything else is U+FFFD.
					dec := utf8.RuneError
					if d.i+6 <= len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' && isHex4(d.s[d.i+2:d.i+6]) {
						dec = utf16.DecodeRune(r, hex4(d.s[d.i+2:]))
					}
					if dec != utf8.RuneError {
						d.i += 6
					}
					r = dec
				}
				out = utf8.AppendRune(out, r)
			default: // '"', '\\', '/'
				out = append(out, e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, size := utf8.DecodeRuneInString(d.s[d.i:])
			d.i += size
			out = utf8.AppendRune(out, r) // invalid bytes become U+FFFD
		}
	}
}
