package anthropic

import (
	"os"
	"testing"

	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
)

func BenchmarkChunk(b *testing.B) {
	data, _ := os.ReadFile("testdata/stream/tools.sse")
	wiretest.BenchFeed(b, data, true, func(em *wire.Emitter) wire.Parser { return newParser(em) })
}

func FuzzParser(f *testing.F) {
	wiretest.FuzzSeeds(f, "stream", "sse", true)
	wiretest.FuzzSeedsWhole(f, "stream", "sse", true)
	f.Fuzz(func(t *testing.T, data []byte) {
		wiretest.FuzzGrammar(t, data, func(em *wire.Emitter) wire.Parser { return newParser(em) })
	})
}
