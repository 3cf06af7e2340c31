// Package sandbox is the Go port of TanStack AI's sandbox layer: sandbox
// definitions keyed per thread (or run), a provider/handle contract, workspace
// bootstrap, a workspace file watcher (native or a portable `find` poll),
// lazy git-backed file hook events, and the WithSandbox chat middleware.
//
// In a chat run, WithSandbox does all of the wiring:
//
//	repo, _ := sandbox.Define(sandbox.Definition{ID: "repo-agent", Provider: local.New(local.Options{}), Hooks: …})
//	chat.Stream(ctx, chat.Options{
//		ThreadID:   "thread-1",
//		Adapter:    adapter,                     // a harness Requires sandbox.HandleCapability
//		Middleware: []*chat.Middleware{sandbox.WithSandbox(repo, sandbox.Options{}), audit},
//		Debug:      &chat.Debug{Categories: map[string]bool{chat.CatSandbox: true}},
//	})
//
// Outside a run, the same pieces can be driven by hand (this is what the
// middleware does):
//
//	s, _ := sandbox.Define(def)                       // inert
//	h, outcome, err := s.Ensure(ctx, rc)              // resume, restore or create, under the key lock
//	base := sandbox.Baseline(ctx, h, def.Root(), log) // git rev-parse HEAD, once, before OnReady
//	d := sandbox.NewDispatcher(runCtx, sandbox.DispatcherOptions{Hooks: def.Hooks, Runtime: rt, Diff: def.FileEvents.Diff()})
//	w, _ := sandbox.WatchWorkspace(ctx, h, sandbox.WatchOptions{Root: def.Root(), OnEvent: func(ev sandbox.WatchEvent) {
//		d.Dispatch(sandbox.NewFileContent(h, def.Root(), base, ev, log))
//	}})
//	…
//	w.Drain(); d.Close()                              // reconcile, then deliver every pending event, hook and diff
//
// Three types carry a file event, one per stage: the watcher reports a
// [WatchEvent]; [FileContent] adds the lazy, git-backed Before, After and
// Diff; and every hook, sandbox-scoped ([Hooks]) or run-scoped
// (chat.Middleware.Sandbox), receives the same chat.FileEvent, whose
// Content is that FileContent.
//
// A live sandbox has one watcher and one dispatcher for its sandbox-scoped
// hooks, shared (reference-counted) by the runs that use it: the first run
// that gets ready takes the session's git baseline and starts them, every
// run subscribes its own event stream, and the last run to let go (or a
// destroy) stops them. Sandbox-scoped hooks fire once per file event
// however many runs share the sandbox; run-scoped hooks and the
// sandbox.file events fire for each run. [Sandbox.LiveWatchers] counts
// them.
//
// Content accessors and cancellation: Before, After and Diff keep the
// values of the context they are given but ignore its cancellation, and
// each call is bounded by [AccessorTimeout] instead. A hook may therefore
// pass its run's context even while the run is being aborted; it still
// reads the content it was told about. On an abort, WithSandbox destroys
// the sandbox only after the engine has run every run-scoped hook.
//
// Exec buffers at most ExecOptions.MaxOutputBytes of each stream (by
// default [DefaultMaxOutputBytes], 1 MiB) and reports what it cut in
// ExecResult.Truncated; a command that prints without end cannot exhaust
// the server's memory.
//
// Logging uses *slog.Logger. Every record carries a "category" attribute:
// "sandbox" for debug records about expected conditions and "errors" for
// real anomalies (warn and error level). Inside WithSandbox these records
// go to the run's debug logger (debug under the "sandbox" category, warn and
// error under "errors") as well as to Definition.Logger.
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
//   - WithSandbox's terminal hooks drain the watcher with a final
//     reconciliation (Watcher.Drain), and the engine delivers what they
//     queue, so no file event or diff made before the run ended is lost.
//   - A failing Hooks.OnError does not skip DestroyOnComplete.
//   - The key hash is FNV over canonical JSON as specified, but the
//     workspace's canonical form is Go's, so keys are not shared with TS
//     stores.
package sandbox
