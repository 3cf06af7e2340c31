// Package fromenv builds a provider adapter from a "provider:model" string
// and the environment, for goai serve.
package fromenv

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/anthropic"
	"github.com/goai-sdk/goai/provider/gemini"
	"github.com/goai-sdk/goai/provider/internal/wire"
	"github.com/goai-sdk/goai/provider/ollama"
	"github.com/goai-sdk/goai/provider/openai"
	"github.com/goai-sdk/goai/provider/openaicompat"
)

// Providers lists the accepted provider prefixes.
var Providers = []string{"openai", "openai-chat", "anthropic", "gemini", "ollama", "openaicompat"}

// Adapter returns the adapter that model names. model is "provider:model":
//
//	openai:<model>        Responses API; OPENAI_API_KEY (OPENAI_BASE_URL optional)
//	openai-chat:<model>   Chat Completions; OPENAI_API_KEY (OPENAI_BASE_URL optional)
//	anthropic:<model>     Messages API; ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL optional)
//	gemini:<model>        Gemini API; GEMINI_API_KEY or GOOGLE_API_KEY (GEMINI_BASE_URL optional)
//	ollama:<model>        /api/chat at OLLAMA_HOST (default http://localhost:11434); OLLAMA_API_KEY optional
//	openaicompat:<model>  Chat Completions at OPENAI_BASE_URL (required); OPENAI_API_KEY optional
//
// getenv is os.Getenv in production; client may be nil.
func Adapter(model string, getenv func(string) string, client *http.Client) (chat.Adapter, error) {
	prov, name, ok := strings.Cut(model, ":")
	if !ok || prov == "" || name == "" {
		return nil, fmt.Errorf("model %q: want provider:model with provider one of %s", model, strings.Join(Providers, ", "))
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	opts := func(keyVar, baseVar string, needKey bool) (*wire.Options, error) {
		o := &wire.Options{HTTPClient: client}
		if keyVar != "" {
			o.APIKey = strings.TrimSpace(getenv(keyVar))
			if o.APIKey == "" && needKey {
				return nil, fmt.Errorf("provider %s: %s is not set", prov, keyVar)
			}
		}
		if baseVar != "" {
			o.BaseURL = strings.TrimSpace(getenv(baseVar))
		}
		return o, nil
	}
	switch prov {
	case "openai", "openai-chat":
		o, err := opts("OPENAI_API_KEY", "OPENAI_BASE_URL", true)
		if err != nil {
			return nil, err
		}
		if prov == "openai" {
			return openai.NewResponses(name, o), nil
		}
		return openai.NewChat(name, o), nil
	case "anthropic":
		o, err := opts("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", true)
		if err != nil {
			return nil, err
		}
		return anthropic.New(name, o), nil
	case "gemini":
		o, err := opts("GEMINI_API_KEY", "GEMINI_BASE_URL", false)
		if err != nil {
			return nil, err
		}
		if o.APIKey == "" {
			o.APIKey = strings.TrimSpace(getenv("GOOGLE_API_KEY"))
		}
		if o.APIKey == "" {
			return nil, fmt.Errorf("provider gemini: GEMINI_API_KEY is not set (nor GOOGLE_API_KEY)")
		}
		return gemini.New(name, o), nil
	case "ollama":
		o, _ := opts("OLLAMA_API_KEY", "", false)
		if h := strings.TrimSpace(getenv("OLLAMA_HOST")); h != "" {
			if !strings.Contains(h, "://") {
				h = "http://" + h
			}
			o.BaseURL = h
		}
		return ollama.New(name, o), nil
	case "openaicompat":
		o, _ := opts("OPENAI_API_KEY", "OPENAI_BASE_URL", false)
		if o.BaseURL == "" {
			return nil, fmt.Errorf("provider openaicompat: OPENAI_BASE_URL is not set (the server's base URL, e.g. http://localhost:8000/v1)")
		}
		return openaicompat.New(name, o), nil
	}
	return nil, fmt.Errorf("model %q: unknown provider %q (want one of %s)", model, prov, strings.Join(Providers, ", "))
}
