package fromenv_test

import (
	"strings"
	"testing"

	"github.com/goai-sdk/goai/provider/fromenv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestAdapter(t *testing.T) {
	full := env(map[string]string{
		"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a", "GEMINI_API_KEY": "g",
		"OLLAMA_HOST": "127.0.0.1:11434", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
	})
	for model, name := range map[string]string{
		"openai:gpt-5":                 "openai",
		"openai-chat:gpt-4o":           "openai-chat",
		"anthropic:claude-sonnet-4-5":  "anthropic",
		"gemini:gemini-2.5-flash":      "gemini",
		"ollama:llama3.2":              "ollama",
		"openaicompat:Qwen/Qwen2.5-7B": "openaicompat",
	} {
		a, err := fromenv.Adapter(model, full, nil)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if a.Name() != name || a.Model() != model[strings.Index(model, ":")+1:] {
			t.Errorf("%s: %s %s", model, a.Name(), a.Model())
		}
	}
	if _, err := fromenv.Adapter("ollama:llama3.2", env(nil), nil); err != nil {
		t.Errorf("ollama needs no key: %v", err)
	}
	if _, err := fromenv.Adapter("gemini:x", env(map[string]string{"GOOGLE_API_KEY": "k"}), nil); err != nil {
		t.Errorf("GOOGLE_API_KEY fallback: %v", err)
	}
	for model, want := range map[string]string{
		"openai:gpt-5":       "OPENAI_API_KEY",
		"openai-chat:gpt-4o": "OPENAI_API_KEY",
		"anthropic:claude":   "ANTHROPIC_API_KEY",
		"gemini:flash":       "GEMINI_API_KEY",
		"openaicompat:x":     "OPENAI_BASE_URL",
		"nope:x":             "unknown provider",
		"gpt-5":              "provider:model",
	} {
		_, err := fromenv.Adapter(model, env(nil), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to name %s", model, err, want)
		}
	}
}
