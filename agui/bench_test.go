package agui

import "testing"

func BenchmarkAppendWireTextContent(b *testing.B) {
	e := Event{Type: TextMessageContent, MessageID: "msg-1700000000000-abc123", Delta: "Hello, world! This is a token.",
		Timestamp: 1700000000000}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendWire(buf[:0], &e)
	}
	if len(buf) == 0 {
		b.Fatal("empty")
	}
}

func BenchmarkAppendWireRunFinishedUsage(b *testing.B) {
	cached := int64(4)
	e := Event{Type: RunFinished, ThreadID: "t", RunID: "r", Model: "gpt-4o", FinishReason: FinishStop,
		Usage: &TokenUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15,
			PromptTokensDetails: &PromptTokensDetails{CachedTokens: &cached}}}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendWire(buf[:0], &e)
	}
}
