package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// maxLineBytes bounds one stdio message (one line).
const maxLineBytes = 16 << 20

// stdioTransport is MCP over newline-delimited JSON on a reader and a writer, hardened
// for the edge of the process: bad input is answered, never fatal. A line that is not
// JSON gets a -32700 error response, JSON that is not a JSON-RPC message (or an empty
// batch) gets -32600, and a line longer than maxLine gets -32600 and is discarded; all
// with id null, and reading goes on, so nothing already running is touched. A response
// to a request the client cancelled (notifications/cancelled) is not sent.
type stdioTransport struct {
	in      io.Reader
	out     io.Writer
	maxLine int // 0: maxLineBytes
}

// Connect implements mcp.Transport.
func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	maxLine := t.maxLine
	if maxLine <= 0 {
		maxLine = maxLineBytes
	}
	in := openInput(t.in)
	return &stdioConn{
		input:     in,
		lineInput: bufio.NewReaderSize(in.r, 64<<10),
		maxLine:   maxLine,
		out:       t.out,
		closed:    make(chan struct{}),
		inflight:  map[jsonrpc.ID]bool{},
		batches:   map[jsonrpc.ID]*stdioBatch{},
	}, nil
}

type stdioConn struct {
	input     input
	lineInput *bufio.Reader
	maxLine   int
	queue     []jsonrpc.Message // the rest of a batch; Read only
	closeOnce sync.Once
	closed    chan struct{}

	writeMu sync.Mutex // one line at a time on out
	out     io.Writer

	mu       sync.Mutex
	inflight map[jsonrpc.ID]bool // requests read and not answered; true = cancelled
	batches  map[jsonrpc.ID]*stdioBatch
}

// stdioBatch collects the responses to one JSON-RPC batch; they are written together,
// as one array, when the last one is in.
type stdioBatch struct {
	pending   int
	responses []*jsonrpc.Response
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next well-formed message, answering bad lines on the way. It reads
// in the caller's goroutine (no hand-off per message); Close unblocks it.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			msg := c.queue[0]
			c.queue = c.queue[1:]
			return msg, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, err := c.readLine()
		if len(line) > 0 {
			c.queue = c.decode(line)
		}
		if err != nil && len(c.queue) == 0 {
			select {
			case <-c.closed:
				return nil, io.EOF
			default:
				return nil, err
			}
		}
	}
}

// readLine returns the next line (a fresh copy) without its line ending and surrounding
// blanks. A line longer than maxLine is answered with -32600 as soon as the limit is
// passed, consumed to its end as it arrives, and returned empty. err is the input's end
// (io.EOF) or failure; a last line without a newline is still returned.
func (c *stdioConn) readLine() ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := c.lineInput.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > c.maxLine+2 { // + "\r\n"
				tooLong, buf = true, nil
				c.writeError(jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: the message exceeds the %d MiB line limit; it was discarded", c.maxLine>>20))
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(buf), err
	}
}

// decode parses one line into the messages to hand to the server. A bad line is
// answered here and yields nothing.
func (c *stdioConn) decode(line []byte) []jsonrpc.Message {
	if line[0] == '[' {
		return c.decodeBatch(line)
	}
	msg, err := decodeMessage(line)
	if err != nil {
		c.answerBad(line, err)
		return nil
	}
	c.track(msg)
	return []jsonrpc.Message{msg}
}

func (c *stdioConn) decodeBatch(line []byte) []jsonrpc.Message {
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		c.answerBad(line, err)
		return nil
	}
	if len(raws) == 0 {
		c.writeError(jsonrpc.CodeInvalidRequest, "Invalid Request: empty batch")
		return nil
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	batch := &stdioBatch{}
	for i, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			c.writeError(jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: batch element %d is not a JSON-RPC 2.0 message: %v", i, err))
			return nil
		}
		msgs = append(msgs, msg)
	}
	c.mu.Lock()
	for _, msg := range msgs {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.batches[req.ID] = batch
			batch.pending++
		}
	}
	c.mu.Unlock()
	for _, msg := range msgs {
		c.track(msg)
	}
	return msgs
}

// envelope is a JSON-RPC 2.0 message as it arrives.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeMessage decodes one JSON-RPC 2.0 message as jsonrpc.DecodeMessage does (a
// "method" key makes it a request, else it is a response and needs an id), without the
// SDK's per-call decoder buffer.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&e); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the message")
	}
	if e.JSONRPC != "2.0" {
		return nil, fmt.Errorf(`want "jsonrpc": "2.0", got %q`, e.JSONRPC)
	}
	id, err := jsonrpc.MakeID(e.ID)
	if err != nil {
		return nil, err
	}
	if e.Method != nil {
		return &jsonrpc.Request{Method: *e.Method, ID: id, Params: e.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New(`neither a request (no "method") nor a response (no "id")`)
	}
	resp := &jsonrpc.Response{ID: id, Result: e.Result}
	if e.Error != nil {
		resp.Error = e.Error
	}
	return resp, nil
}

// answerBad answers a line that failed to decode: -32700 when it is not JSON at all,
// -32600 when it is JSON but not a JSON-RPC message.
func (c *stdioConn) answerBad(line []byte, err error) {
	if !json.Valid(line) {
		c.writeError(jsonrpc.CodeParseError, "Parse error: the line is not valid JSON")
		return
	}
	c.writeError(jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message: "+err.Error())
}

// track records calls in flight, and marks them cancelled when the client says so, so
// that their responses are dropped.
func (c *stdioConn) track(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	if req.IsCall() {
		c.mu.Lock()
		c.inflight[req.ID] = false
		c.mu.Unlock()
		return
	}
	if req.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	c.mu.Lock()
	if _, ok := c.inflight[id]; ok {
		c.inflight[id] = true
	}
	c.mu.Unlock()
}

// Write sends msg as one line; responses of a batch wait for the batch to be complete.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		cancelled := c.inflight[resp.ID]
		delete(c.inflight, resp.ID)
		batch := c.batches[resp.ID]
		delete(c.batches, resp.ID)
		var complete []*jsonrpc.Response
		if batch != nil {
			batch.pending--
			if !cancelled {
				batch.responses = append(batch.responses, resp)
			}
			if batch.pending == 0 && len(batch.responses) > 0 {
				complete = batch.responses
			}
		}
		c.mu.Unlock()
		switch {
		case batch != nil && complete == nil:
			return nil
		case batch != nil:
			return c.writeBatch(complete)
		case cancelled:
			return nil
		}
	}
	data, err := encodeMessage(msg)
	if err != nil {
		return fmt.Errorf("stdio: encoding a message: %w", err)
	}
	return c.writeLine(data)
}

// encodeMessage encodes msg as jsonrpc.EncodeMessage does. A successful response is
// written around its result as it is: the SDK encoded that already, compact, and
// encoding it again would only validate and copy it (a 64 kB output tail becomes a
// result of several hundred kB).
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || !resp.ID.IsValid() || len(resp.Result) == 0 || bytes.IndexByte(resp.Result, '\n') >= 0 {
		return jsonrpc.EncodeMessage(msg)
	}
	var id []byte
	switch v := resp.ID.Raw().(type) {
	case int64:
		id = strconv.AppendInt(nil, v, 10)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as the SDK encodes
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		id = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	data := make([]byte, 0, len(head)+len(id)+len(mid)+len(resp.Result)+2) // + "}\n"
	data = append(data, head...)
	data = append(data, id...)
	data = append(data, mid...)
	data = append(data, resp.Result...)
	return append(data, '}'), nil
}

func (c *stdioConn) writeBatch(resps []*jsonrpc.Response) error {
	raws := make([]json.RawMessage, len(resps))
	for i, r := range resps {
		data, err := jsonrpc.EncodeMessage(r)
		if err != nil {
			return fmt.Errorf("stdio: encoding a message: %w", err)
		}
		raws[i] = data
	}
	data, err := json.Marshal(raws)
	if err != nil {
		return err
	}
	return c.writeLine(data)
}

// writeError answers bad input: a JSON-RPC error response with id null.
func (c *stdioConn) writeError(code int64, message string) {
	data, _ := json.Marshal(struct {
		JSONRPC string        `json:"jsonrpc"`
		ID      *int          `json:"id"`
		Error   jsonrpc.Error `json:"error"`
	}{JSONRPC: "2.0", Error: jsonrpc.Error{Code: code, Message: message}})
	_ = c.writeLine(data)
}

func (c *stdioConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	// One write per line: the newline goes with the message.
	_, err := c.out.Write(append(data, '\n'))
	return err
}

// Close unblocks Read, which then reports the end of input.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.input.unblock()
		c.input.restore()
	})
	return nil
}

// input is where a stdioConn reads, and how a blocked read is ended.
type input struct {
	r       io.Reader
	unblock func() // makes a blocked read return
	restore func() // puts the descriptor back the way it was
}

// openInput prepares in for reading in the server's reader goroutine. A pipe or socket
// is read through the Go runtime's poller (made non-blocking if it is not): the reading
// goroutine then parks instead of blocking its thread in read(2), so each message goes on
// to the next goroutine without the scheduler first taking the processor back from a
// blocked thread — and a read deadline ends a read at Close. Other inputs (a terminal, a
// file, an in-memory reader) are pumped through an in-memory pipe by a goroutine of
// their own, which Close can close.
func openInput(in io.Reader) input {
	nothing := func() {}
	if f, ok := in.(*os.File); ok {
		if p, restore, ok := pollableFile(f); ok {
			return input{r: p, unblock: func() { _ = p.SetReadDeadline(time.Now()) }, restore: restore}
		}
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, in)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	return input{r: pr, unblock: func() { pr.CloseWithError(io.EOF) }, restore: nothing}
}

// pollableFile returns f as a file the runtime polls, if f is a pipe or a socket.
func pollableFile(f *os.File) (_ *os.File, restore func(), ok bool) {
	nothing := func() {}
	if f.SetReadDeadline(time.Time{}) == nil {
		return f, nothing, true // already polled
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return nil, nil, false
	}
	// Not f.Fd(): it would put a polled file in blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, false
	}
	fd := -1
	_ = rc.Control(func(raw uintptr) {
		if unix.SetNonblock(int(raw), true) == nil {
			fd = int(raw)
		}
	})
	if fd < 0 {
		return nil, nil, false
	}
	p := os.NewFile(uintptr(fd), f.Name())
	if p.SetReadDeadline(time.Time{}) != nil { // the poller refused it
		_ = unix.SetNonblock(fd, false)
		return nil, nil, false
	}
	return p, func() { _ = unix.SetNonblock(fd, false) }, true
}
