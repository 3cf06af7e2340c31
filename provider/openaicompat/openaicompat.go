// Package openaicompat adapts any Chat Completions-compatible server
// (vLLM, LM Studio, llama.cpp, DeepSeek, Together, Groq, OpenRouter,
// Ollama's /v1, ...) by base URL and key.
//
// It is provider/openai's hand-written Chat Completions client (see that
// package for why no SDK) reporting the name "openaicompat". Its parser is
// tolerant by construction: a stream without usage finishes with no usage;
// tool-call ids that are missing are generated and ids reused by another
// call are made unique; arguments sent whole in one chunk (or as a JSON
// object rather than a string) are accepted; several calls on one index
// are told apart by their ids; reasoning arrives as reasoning_content or
// reasoning; a stream that ends after a finish_reason without "[DONE]"
// still finishes.
package openaicompat

import (
	"github.com/goai-sdk/goai/provider/openai"
)

// Options configures the transport; BaseURL is required (for example
// "http://localhost:8000/v1"); APIKey is optional.
type Options = openai.Options

// Adapter is a Chat Completions adapter.
type Adapter = openai.Chat

// New returns an adapter for model at opts.BaseURL. Set NoStreamOptions
// on the result for servers that reject stream_options.
func New(model string, opts *Options) *Adapter {
	return openai.NewChatNamed("openaicompat", model, opts)
}
