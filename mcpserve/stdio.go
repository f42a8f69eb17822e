package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one client on in and out (newline-delimited JSON-RPC) until the
// input ends, the output breaks (the client closed it) or ctx ends; then the calls in
// flight (aborted with ctx) send their answers first. It returns once the client's
// harness session has ended (its processes are gone within 2 s: the shutdown that
// follows does not decide how long they get).
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	sc := s.newScope(ctx, nil, allProtocolVersions)
	defer s.dropScope(sc)
	t := &stdioTransport{in: in, out: out}
	ss, err := sc.server.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	defer s.awaitEnd(ss)
	select {
	case err := <-ended:
		if t.conn.outputBroken() {
			s.log.Info("the client closed dsh's output; shutting down")
			return nil
		}
		return err
	case <-ctx.Done():
		t.conn.drain(drainTimeout)
		_ = ss.Close()
		<-ended
		return nil
	}
}

// maxLineBytes bounds one stdio message (one line).
const maxLineBytes = 16 << 20

// Backpressure on stdio: reading stops while maxUnanswered calls wait for their answer
// to be written, or while a write to the client has not finished for writeStall (it is
// not reading):
// otherwise a client that writes without reading piles up requests and answers in
// dsh's memory.
const (
	maxUnanswered = 1024
	writeStall    = 100 * time.Millisecond
)

// stdioTransport is MCP over newline-delimited JSON on a reader and a writer, hardened
// for the edge of the process: bad input is answered, never fatal. A line that is not
// JSON gets a -32700 error response, JSON that is not a JSON-RPC message (or an empty
// batch, or a batch on a revision without batches, or a request whose id is in use by
// a request in flight) gets -32600, and a line longer than maxLine gets -32600 and is
// discarded; all with id null, and reading goes on, so nothing already running is
// touched. A response to a request the client cancelled (notifications/cancelled) is
// not sent — unless it is a tools/call the cancellation reached too late, one that
// succeeded: an aborted call reports "tool call aborted" (an error), so a success was
// settled first, and what it answers (a background job's id) is what the client needs
// to know. Reading waits while the client does not take what is written (see
// maxUnanswered); a write that fails (the client closed its end) ends the connection.
type stdioTransport struct {
	in      io.Reader
	out     io.Writer
	maxLine int        // 0: maxLineBytes
	conn    *stdioConn // once connected
}

// Connect implements mcp.Transport.
func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	maxLine := t.maxLine
	if maxLine <= 0 {
		maxLine = maxLineBytes
	}
	in := openInput(t.in)
	t.conn = &stdioConn{
		input:     in,
		lineInput: bufio.NewReaderSize(in.r, 64<<10),
		maxLine:   maxLine,
		out:       t.out,
		closed:    make(chan struct{}),
		room:      make(chan struct{}, 1),
		inflight:  map[jsonrpc.ID]bool{},
		tools:     map[jsonrpc.ID]bool{},
		batches:   map[jsonrpc.ID]*stdioBatch{},
	}
	return t.conn, nil
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
	broken  atomic.Bool // a write failed: the client closed its end

	room chan struct{} // signalled when an answer or a write is done (awaitRoom)

	mu        sync.Mutex
	inflight  map[jsonrpc.ID]bool // requests read and not answered; true = cancelled
	tools     map[jsonrpc.ID]bool // the tools/call requests among them
	batches   map[jsonrpc.ID]*stdioBatch
	unwritten int           // calls read whose answer is not out yet
	revision  string        // the session's revision once initialize was read
	writing   time.Time     // when the write in progress began; zero when none
	drained   chan struct{} // closed when nothing is in flight any more (drain)
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
		c.awaitRoom()
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
	if !c.track(msg) {
		return nil
	}
	return []jsonrpc.Message{msg}
}

// decodeBatch decodes a batch, which only a session of a revision that has batches
// may send (2025-03-26 or older): MCP removed them in 2025-06-18.
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
	for i, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			c.writeError(jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: batch element %d is not a JSON-RPC 2.0 message: %v", i, err))
			return nil
		}
		msgs = append(msgs, msg)
	}
	c.mu.Lock()
	refusal := batchRefusal(c.revision)
	c.mu.Unlock()
	if refusal != "" {
		c.writeError(jsonrpc.CodeInvalidRequest, "Invalid Request: "+refusal)
		return nil
	}
	tracked := msgs[:0]
	for _, msg := range msgs {
		if c.track(msg) {
			tracked = append(tracked, msg)
		}
	}
	batch := &stdioBatch{}
	c.mu.Lock()
	for _, msg := range tracked {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.batches[req.ID] = batch
			batch.pending++
		}
	}
	c.mu.Unlock()
	return tracked
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
	_ = c.writeLine(errorLine(code, message))
}

// writeLine writes one line. A failed write means the client's end is gone (EPIPE:
// it closed dsh's output): the connection ends, as at the end of its input.
func (c *stdioConn) writeLine(data []byte) error {
	if c.broken.Load() {
		return io.ErrClosedPipe
	}
	c.writeMu.Lock()
	c.mu.Lock()
	c.writing = time.Now()
	c.mu.Unlock()
	// One write per line: the newline goes with the message.
	_, err := c.out.Write(append(data, '\n'))
	c.mu.Lock()
	c.writing = time.Time{}
	c.mu.Unlock()
	c.writeMu.Unlock()
	c.signalRoom()
	if err != nil && !c.broken.Swap(true) {
		c.Close()
	}
	return err
}

// outputBroken reports whether a write failed (the client closed dsh's output).
func (c *stdioConn) outputBroken() bool { return c != nil && c.broken.Load() }

// awaitRoom returns once reading another message cannot pile up what the client does
// not take: fewer than maxUnanswered calls unanswered, and no write stuck for
// writeStall. Close ends the wait.
func (c *stdioConn) awaitRoom() {
	for {
		c.mu.Lock()
		full := c.unwritten >= maxUnanswered
		since := c.writing
		c.mu.Unlock()
		stuck := !since.IsZero() && time.Since(since) >= writeStall
		if !full && !stuck {
			return
		}
		select {
		case <-c.room:
		case <-c.closed:
			return
		}
	}
}

func (c *stdioConn) signalRoom() {
	select {
	case c.room <- struct{}{}:
	default:
	}
}

// drain waits, up to timeout, until the answer of every call read is written (or the
// connection closed).
func (c *stdioConn) drain(timeout time.Duration) {
	c.mu.Lock()
	if c.unwritten <= 0 {
		c.mu.Unlock()
		return
	}
	c.drained = make(chan struct{})
	drained := c.drained
	c.mu.Unlock()
	select {
	case <-drained:
	case <-c.closed:
	case <-time.After(timeout):
	}
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
