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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one client on in and out (newline-delimited JSON-RPC) until the
// input ends or ctx does.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	sc := s.newScope(ctx, nil, allProtocolVersions)
	defer s.dropScope(sc)
	ss, err := sc.server.Connect(ctx, &stdioTransport{in: in, out: out}, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		_ = ss.Close()
		<-ended
		return nil
	}
}

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
