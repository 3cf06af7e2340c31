// Package sandbox is the Go port of TanStack AI's sandbox layer: sandbox
// definitions keyed per thread (or run), a provider/handle contract, workspace
// bootstrap, a workspace file watcher (native or a portable `find` poll) and
// lazy git-backed file hook events.
//
// The package has no dependency on the chat engine. The engine's WithSandbox
// middleware drives the pieces from outside:
//
//	s, _ := sandbox.Define(def)                       // inert
//	h, outcome, err := s.Ensure(ctx, rc)              // resume, restore or create, under the key lock
//	base := sandbox.Baseline(ctx, h, def.Root(), log) // git rev-parse HEAD, once, before OnReady
//	d := sandbox.NewDispatcher(runCtx, sandbox.DispatcherOptions{Hooks: def.Hooks, Runtime: rt, Diff: def.FileEvents.Diff()})
//	w, _ := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Root: def.Root(), OnEvent: func(ev sandbox.FileEvent) {
//		d.Dispatch(sandbox.NewFileHookEvent(h, def.Root(), base, ev, log))
//	}})
//	…
//	w.Stop(); d.Close()                               // drain: pending coalesced events, hooks, diffs
//
// Logging uses *slog.Logger. Every record carries a "category" attribute:
// "sandbox" for debug records about expected conditions and "errors" for
// real anomalies (warn and error level).
//
// Differences from TanStack AI, on purpose:
//   - The fallback instance store and lock belong to each Sandbox, not to
//     the process, so two definitions never collide.
//   - A git clone's exit code is checked (*CommandError).
//   - Native watching is used on Linux (inotify) and coalesces raw events
//     per path within a window (50 ms by default); a queue overflow is
//     answered by a rescan and a failed native watch falls back to polling.
//   - A poll whose find output is byte-identical to the previous complete
//     one is not parsed.
//   - A signal-killed command reports 128+signal, not 0.
//   - The key hash is FNV over canonical JSON as specified, but the
//     workspace's canonical form is Go's, so keys are not shared with TS
//     stores.
package sandbox
