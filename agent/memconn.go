package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// memQueue is how many messages one direction of an in-memory session
// holds before a writer waits: enough for every turn the bot runs at once
// to have its call in flight.
const memQueue = 256

// errMemClosed is what an in-memory connection answers once either end
// closed it.
var errMemClosed = errors.New("in-memory MCP connection closed")

// memPipe is an in-memory MCP session that hands JSON-RPC messages from
// one end to the other as values, not as bytes through a synchronous pipe
// (the SDK's own in-memory transport): no encoding, no decoding, and no
// writer waiting for the one reader to take its bytes, which made every
// concurrent call to a built-in server queue behind the others. Each
// message is copied as the wire would (its raw JSON cloned, an error
// turned into its wire form, nothing of Extra carried across), so that
// neither end can see or change what the other holds.
type memPipe struct {
	toServer, toClient chan jsonrpc.Message
	done               chan struct{}
	once               sync.Once
}

// newMemTransports returns the client's and the server's end of a new
// in-memory session.
func newMemTransports() (client, server mcp.Transport) {
	p := &memPipe{
		toServer: make(chan jsonrpc.Message, memQueue),
		toClient: make(chan jsonrpc.Message, memQueue),
		done:     make(chan struct{}),
	}
	return &memTransport{&memConn{p: p, in: p.toClient, out: p.toServer}},
		&memTransport{&memConn{p: p, in: p.toServer, out: p.toClient}}
}

// memTransport is one end of a memPipe, as an mcp.Transport.
type memTransport struct{ conn *memConn }

// Connect implements mcp.Transport: the end's connection, whose session
// ends when either end closes.
func (t *memTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

// memConn is one end's mcp.Connection.
type memConn struct {
	p   *memPipe
	in  <-chan jsonrpc.Message
	out chan<- jsonrpc.Message
}

// Read implements mcp.Connection: the next message from the other end, or
// io.EOF once the session is closed and nothing is left to read.
func (c *memConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	default:
	}
	select {
	case m := <-c.in:
		return m, nil
	case <-c.p.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write implements mcp.Connection: a copy of m for the other end, waiting
// while its queue is full.
func (c *memConn) Write(ctx context.Context, m jsonrpc.Message) error {
	cp, err := wireCopy(m)
	if err != nil {
		return err
	}
	select {
	case <-c.p.done:
		return errMemClosed
	default:
	}
	select {
	case c.out <- cp:
		return nil
	case <-c.p.done:
		return errMemClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements mcp.Connection: it ends the session for both ends.
func (c *memConn) Close() error {
	c.p.once.Do(func() { close(c.p.done) })
	return nil
}

// SessionID implements mcp.Connection; an in-memory session has none.
func (c *memConn) SessionID() string { return "" }

// wireCopy is m as the other end would have decoded it from the wire.
func wireCopy(m jsonrpc.Message) (jsonrpc.Message, error) {
	switch m := m.(type) {
	case *jsonrpc.Request:
		return &jsonrpc.Request{ID: m.ID, Method: m.Method, Params: bytes.Clone(m.Params)}, nil
	case *jsonrpc.Response:
		if m.Error == nil {
			return &jsonrpc.Response{ID: m.ID, Result: bytes.Clone(m.Result)}, nil
		}
		// An error reaches the other end as its wire form (code, message,
		// data), never as the Go value the handler returned: encode and
		// decode it, as rare as it is.
		b, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			return nil, err
		}
		return jsonrpc.DecodeMessage(b)
	default:
		return nil, fmt.Errorf("in-memory MCP connection: unknown message type %T", m)
	}
}
