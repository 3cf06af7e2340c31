// Package openai adapts OpenAI's Responses API (Responses) and Chat
// Completions API (Chat) to the goai engine.
//
// Why hand-written rather than openai-go/v3: the official SDK pulls in 34
// modules (the Azure and AWS SDKs among them), decodes every stream event
// into large union structs, and its ChatCompletionAccumulator breaks against
// "compatible" servers (docs/engine.md §11). The adapter needs one POST, an
// SSE reader and its own accumulators; written against net/http and the
// repository's allocation-conscious JSON scanner it translates a stream
// chunk into AG-UI events in well under 2 µs, and the same code serves
// provider/openaicompat.
//
// Model options are spread into the request body under OpenAI's own keys
// (temperature, top_p, max_output_tokens for Responses, max_tokens or
// max_completion_tokens for Chat, reasoning, store, ...). When "reasoning"
// is set and "include" is not, Responses asks for
// "reasoning.encrypted_content" so reasoning can be carried back: each
// reasoning item's encrypted content becomes the STEP_FINISHED signature,
// the engine stores it as thinking[].signature, and the next request sends
// it back as a reasoning input item (without the item id, which a
// store=false request cannot reference).
package openai

import "github.com/goai-sdk/goai/provider/internal/wire"

// Options configures the transport: base URL (default
// https://api.openai.com/v1), API key, HTTP client, extra headers, retries.
type Options = wire.Options

// DefaultBaseURL is OpenAI's API root.
const DefaultBaseURL = "https://api.openai.com/v1"

func authHeaders(o *Options) map[string][]string {
	h := map[string][]string{}
	if k := o.Key(); k != "" {
		h["Authorization"] = []string{"Bearer " + k}
	}
	return h
}
