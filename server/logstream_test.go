package server

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/durable"
)

// A direct log stream writes each batch's frames in order, in one write
// when they are few and in pieces of maxFrameBuf when a catch-up's page is
// long, from buffers it gives back to the handler's pool.
func TestLogStreamWritesBatches(t *testing.T) {
	var pool sync.Pool
	rec := httptest.NewRecorder()
	ls := &logStream{w: rec, format: agui.SSE, direct: true, frames: &pool}
	var want bytes.Buffer
	seq := 0
	batch := func(n, size int) []durable.Entry {
		es := make([]durable.Entry, n)
		for i := range es {
			seq++
			es[i] = durable.Entry{Offset: fmt.Sprintf("tag:%d", seq), Data: bytes.Repeat([]byte{'a' + byte(seq%26)}, size)}
			want.Write(agui.AppendFrame(nil, agui.SSE, es[i].Offset, es[i].Data))
		}
		return es
	}
	for _, b := range [][]durable.Entry{batch(1, 40), batch(30, 120), batch(2000, 100), batch(3, 3*maxFrameBuf), batch(5, 10)} {
		if err := ls.send(b); err != nil {
			t.Fatal(err)
		}
		if ls.last != b[len(b)-1].Offset {
			t.Fatalf("last offset %q, want %q", ls.last, b[len(b)-1].Offset)
		}
	}
	if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
		t.Fatalf("the stream's %d bytes differ from the %d of the frames in order", rec.Body.Len(), want.Len())
	}
	if bp, _ := pool.Get().(*[]byte); bp != nil && cap(*bp) > 2*maxFrameBuf {
		t.Fatalf("a buffer of %d bytes went back to the pool", cap(*bp))
	}
}
