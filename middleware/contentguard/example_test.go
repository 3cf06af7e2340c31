package contentguard_test

import (
	"log"
	"regexp"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/contentguard"
)

func Example() {
	guard := contentguard.New(contentguard.Options{
		Rules: []contentguard.Rule{
			{Pattern: regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`), Replacement: "[SSN REDACTED]"},
		},
		OnFiltered: func(c *chat.Context, fi contentguard.FilteredInfo) {
			log.Printf("run %s: redacted text in message %s", c.RunID, fi.MessageID)
		},
	})
	_ = chat.Options{Middleware: []*chat.Middleware{guard}}
}
