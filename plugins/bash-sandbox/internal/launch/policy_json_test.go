package launch

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// stdDecode is what the launcher's decoder must agree with: encoding/json with unknown
// keys refused and nothing after the object.
func stdDecode(s string) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, err
	}
	if strings.Trim(s[dec.InputOffset():], " \t\r\n") != "" {
		return Policy{}, errors.New("trailing data")
	}
	return p, nil
}

func TestDecodePolicy(t *testing.T) {
	ok := []struct {
		in   string
		want Policy
	}{
		{`{"mode":"read-only","network":"deny"}`, Policy{Mode: "read-only", Network: "deny"}},
		{" {\n\t\"network\" : \"allow\" , \"mode\":\"workspace-write\",\"workspaceRoot\":\"/w\",\"writableRoots\":[\"/tmp\", \"/var/tmp\"]}\r\n",
			Policy{Mode: "workspace-write", WorkspaceRoot: "/w", WritableRoots: []string{"/tmp", "/var/tmp"}, Network: "allow"}},
		{`{}`, Policy{}},
		{`{"mode":null,"writableRoots":null}`, Policy{}},
		{`{"writableRoots":[]}`, Policy{WritableRoots: []string{}}},
		{`{"writableRoots":[null,"/a"]}`, Policy{WritableRoots: []string{"", "/a"}}},
		{`{"mode":"a","mode":"b"}`, Policy{Mode: "b"}},
		{`{"workspaceRoot":"\/w\\\"q\u00e9\ud83d\ude00\n\t\b\f\r"}`, Policy{WorkspaceRoot: "/w\\\"qé😀\n\t\b\f\r"}},
		{`{"workspaceRoot":"\ud800x\udc00"}`, Policy{WorkspaceRoot: "\ufffdx\ufffd"}},
		{"{\"workspaceRoot\":\"a\xffb\"}", Policy{WorkspaceRoot: "a\ufffdb"}},
		{`{"mo\u0064e":"x"}`, Policy{Mode: "x"}},
	}
	for _, tc := range ok {
		got, err := DecodePolicy(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DecodePolicy(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
		if std, err := stdDecode(tc.in); err != nil || !reflect.DeepEqual(std, got) {
			t.Errorf("encoding/json disagrees on %q: %#v, %v", tc.in, std, err)
		}
	}
	// Stricter than encoding/json, which also matches keys in other letter cases.
	if _, err := DecodePolicy(`{"Mode":"read-only"}`); err == nil || err.Error() != `json: unknown field "Mode"` {
		t.Errorf("a key in another case: %v", err)
	}
	bad := []struct{ in, want string }{
		{``, "unexpected EOF"},
		{`{"mode":`, "unexpected EOF"},
		{`{"mode":"x"`, "unexpected EOF"},
		{`{"mode":"x`, "unexpected EOF"},
		{`{"mode":"read-only","network":"deny","extra":1}`, `json: unknown field "extra"`},
		{`{"mode":"read-only","network":"deny"} {}`, "trailing data after the JSON object"},
		{`{"mode":"read-only"} x`, "trailing data after the JSON object"},
		{"{\n\"mode\": 7}", "json: cannot unmarshal number into Go struct field Policy.mode of type string"},
		{`{"writableRoots":"/tmp"}`, "json: cannot unmarshal string into Go struct field Policy.writableRoots of type []string"},
		{`{"writableRoots":[true]}`, "json: cannot unmarshal bool into Go struct field Policy.writableRoots of type string"},
		{`{"extra":1,"mode":2}`, `json: unknown field "extra"`},
		{`{"mode":2,"extra":1}`, "json: cannot unmarshal number into Go struct field Policy.mode of type string"},
		{`{"mode":2,"extra":}`, "invalid character '}' looking for beginning of value"},
		{`["read-only"]`, "json: cannot unmarshal array into Go value of type launch.Policy"},
		{`{'mode':1}`, `invalid character '\'' looking for beginning of object key string`},
		{`{"mode" "x"}`, "invalid character '\"' after object key"},
		{`{"mode":"x",}`, "invalid character '}' looking for beginning of object key string"},
		{"{\"mode\":\"a\nb\"}", `invalid character '\n' in string literal`},
		{`{"mode":"\x"}`, "invalid character 'x' in string escape code"},
		{`{"mode":"\u12g4"}`, `invalid character 'g' in \u hexadecimal character escape`},
		{`{"n":01}`, "invalid character '1' after object key:value pair"},
		{`{"n":-}`, "invalid character '}' in numeric literal"},
		{`{"n":1.}`, "invalid character '}' after decimal point in numeric literal"},
		{`{"n":1e+}`, "invalid character '}' in exponent of numeric literal"},
		{`{"n":tru}`, "invalid character '}' in literal true (expecting 'e')"},
		{strings.Repeat("[", 10002), "exceeded max depth"},
	}
	for _, tc := range bad {
		if _, err := DecodePolicy(tc.in); err == nil || err.Error() != tc.want {
			t.Errorf("DecodePolicy(%q): err = %v, want %q", tc.in, err, tc.want)
		}
		if _, err := stdDecode(tc.in); err == nil {
			t.Errorf("encoding/json accepts %q", tc.in)
		}
	}
}

// FuzzDecodePolicy: whatever the launcher's decoder accepts, encoding/json accepts with
// the same result; anything encoding/json produced from a Policy decodes back exactly.
func FuzzDecodePolicy(f *testing.F) {
	f.Add(`{"mode":"read-only","network":"deny"}`, "/w", "\x00<>&\u2028")
	f.Add(`{"mode":"workspace-write","workspaceRoot":"/w","writableRoots":["/tmp"],"network":"allow"}`, "", "\xff")
	f.Add(`{"writableRoots":[null,"\ud83d\ude00"]}`, "é", "\\\"")
	f.Add(`{"mode":1e5,"x":{"y":[true,false,null]}}`, "", "")
	f.Fuzz(func(t *testing.T, in, root, extra string) {
		got, err := DecodePolicy(in)
		if err == nil {
			std, stdErr := stdDecode(in)
			if stdErr != nil || !reflect.DeepEqual(std, got) {
				t.Fatalf("DecodePolicy(%q) = %#v but encoding/json: %#v, %v", in, got, std, stdErr)
			}
		}
		p := Policy{Mode: extra, WorkspaceRoot: root, WritableRoots: []string{extra, root}, Network: in}
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodePolicy(string(enc))
		std, _ := stdDecode(string(enc))
		if err != nil || !reflect.DeepEqual(back, std) {
			t.Fatalf("round trip of %s: %#v, %v; encoding/json: %#v", enc, back, err, std)
		}
	})
}

func TestIsCleanAbs(t *testing.T) {
	for _, p := range []string{"/", "/a", "/a/b", "/a.b/..c", "/...", "/a b"} {
		if !isCleanAbs(p) {
			t.Errorf("isCleanAbs(%q) = false", p)
		}
	}
	for _, p := range []string{"", "a", "a/b", "//", "/a/", "/a//b", "/./a", "/a/.", "/a/..", "/../a", "/a/../b", "/a\x00b"} {
		if isCleanAbs(p) {
			t.Errorf("isCleanAbs(%q) = true", p)
		}
	}
}

// FuzzIsCleanAbs: isCleanAbs is filepath.IsAbs and filepath.Clean(p) == p (for paths
// without NUL, which no path can hold).
func FuzzIsCleanAbs(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "//x", "/a/./", "rel"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if strings.IndexByte(p, 0) >= 0 {
			if isCleanAbs(p) {
				t.Fatalf("%q holds a NUL", p)
			}
			return
		}
		if want := filepath.IsAbs(p) && filepath.Clean(p) == p; isCleanAbs(p) != want {
			t.Fatalf("isCleanAbs(%q) = %v, want %v", p, !want, want)
		}
	})
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"a":                    "a",
		"  a \n\t b\r\n c  ":   "a b c",
		"json: x\n  at line 2": "json: x at line 2",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
