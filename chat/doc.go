// Package chat is the goai chat engine: the agent loop that streams AG-UI
// events from a model adapter, runs tools, and passes every step through a
// middleware chain, as TanStack AI's chat() does.
//
// Stream runs a chat and returns its events as an iter.Seq2; Text returns
// just the text. Options names the adapter (a model provider), the
// conversation, the tools (NewTool builds one from a typed Go function),
// the middleware and the agent-loop Strategy.
//
// # Failures
//
// A model that reports a failure sends a RUN_ERROR event; a thrown failure
// (an adapter or hook error) ends the stream with an error, and an aborted
// run with an *AbortError. A panic in code the engine runs for a run (the
// adapter, a tool, a hook, a strategy) ends only that run, with a *RunError
// of code CodeInternal; its stack is logged under the errors category.
//
// # Wire profiles
//
// Options.Profile selects the event sequence: agui.ProfileTanStack
// reproduces @tanstack/ai 0.58.0 exactly; the default agui profile also
// keeps every text message of a turn in the conversation and answers every
// tool call that will not run. Write the events with agui.Writer.
//
// # Per-run state
//
// A Middleware value serves many runs at once, so state that belongs to
// one run lives in the run, not in the middleware: declare a private
// capability, provide the state in Setup and fetch it in later hooks. The
// state is the run's alone (no map keyed by run, no locking against other
// runs) and goes away with it, however the run ends. A middleware that may
// appear twice in one chain makes its capability in its constructor, one per
// middleware value, as middleware/toolcache and sandbox.WithSandbox do.
//
//	var runState = chat.NewCapability[*counter]("mypkg.counter")
//
//	mw := &chat.Middleware{
//		Name:  "count",
//		Setup: func(c *chat.Context) error { runState.Provide(c, &counter{}); return nil },
//		OnChunk: func(c *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
//			if st, ok := runState.GetOptional(c); ok {
//				st.chunks++
//			}
//			return chat.Pass, nil
//		},
//	}
//
// A hook runs on the run's goroutine, except sandbox hooks and disconnect
// listeners, which run on their own: state they share with other hooks
// needs a mutex.
package chat
