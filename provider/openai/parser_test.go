package openai

import (
	"os"
	"testing"

	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/internal/wiretest"
)

func BenchmarkResponsesChunk(b *testing.B) {
	data, _ := os.ReadFile("testdata/responses/tools.sse")
	wiretest.BenchFeed(b, data, true, func(em *wire.Emitter) wire.Parser { return newResponsesParser(em) })
}

func BenchmarkChatChunk(b *testing.B) {
	data, _ := os.ReadFile("testdata/chat/tools.sse")
	wiretest.BenchFeed(b, data, true, func(em *wire.Emitter) wire.Parser { return newChatParser(em) })
}

func BenchmarkChatTextChunk(b *testing.B) {
	data, _ := os.ReadFile("testdata/chat/text.sse")
	wiretest.BenchFeed(b, data, true, func(em *wire.Emitter) wire.Parser { return newChatParser(em) })
}

func FuzzResponsesParser(f *testing.F) {
	wiretest.FuzzSeeds(f, "responses", "sse", true)
	wiretest.FuzzSeedsWhole(f, "responses", "sse", true)
	f.Fuzz(func(t *testing.T, data []byte) {
		wiretest.FuzzGrammar(t, data, func(em *wire.Emitter) wire.Parser { return newResponsesParser(em) })
	})
}

func FuzzChatParser(f *testing.F) {
	wiretest.FuzzSeeds(f, "chat", "sse", true)
	wiretest.FuzzSeedsWhole(f, "chat", "sse", true)
	f.Fuzz(func(t *testing.T, data []byte) {
		wiretest.FuzzGrammar(t, data, func(em *wire.Emitter) wire.Parser { return newChatParser(em) })
	})
}

// BenchmarkResponsesStream includes the SSE framing: bytes in, events out.
func BenchmarkResponsesStream(b *testing.B) {
	data, _ := os.ReadFile("testdata/responses/reasoning.sse")
	wiretest.BenchStream(b, data, func(em *wire.Emitter) wire.Parser { return newResponsesParser(em) })
}
