package contentguard_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/contentguard"
	"github.com/goai-sdk/goai/middleware/internal/mwtest"
)

// BenchmarkGuardPerChunk compares a run with no middleware and with the
// buffered guard (one SSN rule, default buffer) over messages of 64 and 512
// deltas of 8 bytes. The buffered strategy re-applies the rules to the
// whole message so far, so its cost per chunk grows with the message.
func BenchmarkGuardPerChunk(b *testing.B) {
	ssn := regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)
	for _, n := range []int{64, 512} {
		turn := mwtest.BenchTurn(n, 8)
		b.Run(fmt.Sprintf("none/%d", n), func(b *testing.B) { mwtest.Bench(b, turn, nil) })
		b.Run(fmt.Sprintf("buffered/%d", n), func(b *testing.B) {
			mwtest.Bench(b, turn, []*chat.Middleware{contentguard.New(contentguard.Options{Rules: []contentguard.Rule{{Pattern: ssn, Replacement: "[SSN]"}}})})
		})
		b.Run(fmt.Sprintf("delta/%d", n), func(b *testing.B) {
			mwtest.Bench(b, turn, []*chat.Middleware{contentguard.New(contentguard.Options{Strategy: contentguard.Delta, Rules: []contentguard.Rule{{Pattern: ssn, Replacement: "[SSN]"}}})})
		})
	}
}
