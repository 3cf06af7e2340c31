package ollama

import (
	"os"
	"testing"

	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
)

func BenchmarkChunk(b *testing.B) {
	data, _ := os.ReadFile("testdata/stream/text.ndjson")
	wiretest.BenchFeed(b, data, false, func(em *wire.Emitter) wire.Parser { return newParser(em) })
}

func FuzzParser(f *testing.F) {
	wiretest.FuzzSeeds(f, "stream", "ndjson", false)
	wiretest.FuzzSeedsWhole(f, "stream", "ndjson", false)
	f.Fuzz(func(t *testing.T, data []byte) {
		wiretest.FuzzGrammar(t, data, func(em *wire.Emitter) wire.Parser { return newParser(em) })
	})
}
