package workspace_test

import (
	"testing"

	"github.com/goai-sdk/goai/workspace"
)

// FuzzPolicy: any policy file either parses or is refused, and evaluating
// any command under a parsed policy gives one of the three decisions.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte(`{"commands":{"allow":["go test *"],"ask":["git push *"],"deny":["sudo *"]},"default":"ask","scripts":{"test":"go test ./..."}}`), "go test ./...")
	f.Add([]byte(`{"commands":{"allow":["a.b?*[x]"]}}`), "a.b?zz[x]")
	f.Add([]byte(`{}`), "")
	f.Fuzz(func(t *testing.T, data []byte, cmd string) {
		p, err := workspace.ParsePolicy(data)
		if err != nil {
			return
		}
		switch d := p.Evaluate(cmd); d {
		case workspace.Allow, workspace.Ask, workspace.Deny:
		default:
			t.Fatalf("Evaluate(%q) = %q", cmd, d)
		}
	})
}
