// Package sandbox is the Go port of TanStack AI's sandbox layer: sandbox
// definitions keyed per thread (or run), a provider/handle contract, workspace
// bootstrap, a workspace file watcher (native or a portable `find` poll) and
// lazy git-backed file hook events.
//
// The package has no dependency on the chat engine. The engine's WithSandbox
// middleware drives the pieces from outside: [Sandbox.Ensure] for the handle,
// [Baseline] for the git baseline, [WatchWorkspace] for raw file events,
// [NewFileHookEvent] to enrich each one with lazy Before/After/Diff accessors
// and a [Dispatcher] to run the sandbox-scoped hooks and emit diffs.
//
// Logging uses *slog.Logger. Every record carries a "category" attribute:
// "sandbox" for debug records about expected conditions and "errors" for
// real anomalies (warn and error level).
package sandbox
