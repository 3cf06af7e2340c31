// Package workspace is a set of coding tools over any sandbox.Handle:
// list_files, read_file, write_file, edit_file, search and run_command, as
// typed chat.Tools a model can call.
//
// Tools binds them to one handle (to serve them over MCP, say); RunTools
// takes the run's sandbox from sandbox.HandleCapability, for runs with
// sandbox.WithSandbox:
//
//	tools := workspace.RunTools(workspace.Options{Policy: policy})
//	chat.Stream(ctx, chat.Options{Adapter: a, Tools: tools,
//		Middleware: []*chat.Middleware{sandbox.WithSandbox(repo, sandbox.Options{})}})
//
// Every tool checks its input and answers a problem as a tool error the
// model can act on: a path outside the workspace, a file too large or
// binary, an edit whose old text is missing or ambiguous, a command the
// policy denies, one that runs too long or prints too much. None of them
// fails the run, and no path outside the workspace is ever touched.
//
// run_command is decided by a Policy: allowed commands run, denied ones are
// refused, and the rest pause the run for approval (chat.Tool's
// NeedsApprovalFor), which the client answers like any tool approval.
package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
)

// Tool names.
const (
	ListFiles  = "list_files"
	ReadFile   = "read_file"
	WriteFile  = "write_file"
	EditFile   = "edit_file"
	Search     = "search"
	RunCommand = "run_command"
)

// Names lists the tools in the order Tools returns them.
var Names = []string{ListFiles, ReadFile, WriteFile, EditFile, Search, RunCommand}

// Options bounds the tools. Zero values take the defaults.
type Options struct {
	// Policy decides run_command; nil asks for every command.
	Policy *Policy
	// MaxFileBytes is the largest file read_file, edit_file and search
	// read at all; default 4 MiB.
	MaxFileBytes int64
	// MaxReadBytes bounds the text read_file returns at once; default
	// 64 KiB (a longer range is cut at a line boundary and says so).
	MaxReadBytes int
	// MaxWriteBytes bounds write_file's content and an edit's result;
	// default 1 MiB.
	MaxWriteBytes int
	// CommandTimeout is run_command's default and maximum timeout;
	// default 60s (a call may ask for less).
	CommandTimeout time.Duration
	// MaxOutputBytes bounds each of a command's stdout and stderr as
	// returned (head and tail are kept); default 16 KiB.
	MaxOutputBytes int
	// MaxListEntries bounds list_files; default 500.
	MaxListEntries int
	// MaxSearchMatches bounds search; default 100.
	MaxSearchMatches int
	// Ignore names directories list_files and search skip; default
	// .git and node_modules.
	Ignore []string
}

func (o Options) withDefaults() Options {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 4 << 20
	}
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = 64 << 10
	}
	if o.MaxWriteBytes <= 0 {
		o.MaxWriteBytes = 1 << 20
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 60 * time.Second
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 16 << 10
	}
	if o.MaxListEntries <= 0 {
		o.MaxListEntries = 500
	}
	if o.MaxSearchMatches <= 0 {
		o.MaxSearchMatches = 100
	}
	if o.Ignore == nil {
		o.Ignore = []string{".git", "node_modules"}
	}
	return o
}

// handleFunc finds the sandbox a call works in.
type handleFunc func(ctx context.Context) (sandbox.Handle, error)

// Tools returns the workspace tools bound to h.
func Tools(h sandbox.Handle, opts Options) []*chat.Tool {
	return build(func(context.Context) (sandbox.Handle, error) { return h, nil }, opts)
}

// RunTools returns the workspace tools working in the run's sandbox
// (sandbox.HandleCapability, provided by sandbox.WithSandbox). Called
// outside such a run they answer an error.
func RunTools(opts Options) []*chat.Tool {
	return build(runHandle, opts)
}

// ErrNoSandbox is returned by RunTools' tools in a run without a sandbox.
var ErrNoSandbox = errors.New("workspace: this run has no sandbox (use sandbox.WithSandbox)")

func runHandle(ctx context.Context) (sandbox.Handle, error) {
	tc, ok := chat.ToolCallFrom(ctx)
	if !ok || tc.Run == nil {
		return nil, ErrNoSandbox
	}
	h, err := sandbox.HandleCapability.Get(tc.Run)
	if err != nil || h == nil {
		return nil, ErrNoSandbox
	}
	return h, nil
}

type toolset struct {
	opts   Options
	handle handleFunc
}

func build(hf handleFunc, opts Options) []*chat.Tool {
	ts := &toolset{opts: opts.withDefaults(), handle: hf}
	run := chat.NewTool(RunCommand, "Run a shell command (sh -c) in the workspace root and return its exit code, stdout and stderr. "+
		"Long output is cut in the middle; a command that runs longer than the timeout is killed. Some commands need the user's approval and some are not allowed.", ts.runCommand)
	policy := ts.opts.Policy
	run.NeedsApprovalFor = func(args json.RawMessage) bool {
		var in RunCommandInput
		if json.Unmarshal(args, &in) != nil {
			return false // the call fails validation; nothing runs
		}
		return policy.Evaluate(in.Command) == Ask
	}
	return []*chat.Tool{
		chat.NewTool(ListFiles, "List the files and directories under a path in the workspace (default: the whole workspace), recursively unless recursive is false. .git and node_modules are skipped.", ts.listFiles),
		chat.NewTool(ReadFile, "Read a text file from the workspace. start_line and end_line (1-based, inclusive) select a range; long files are returned in parts, and the answer says which lines it holds.", ts.readFile),
		chat.NewTool(WriteFile, "Create or overwrite a text file in the workspace with the given content. Parent directories are created.", ts.writeFile),
		chat.NewTool(EditFile, "Edit a text file in the workspace by replacing old_text, which must occur exactly once (unless replace_all is true), with new_text. Include enough surrounding context to make old_text unique.", ts.editFile),
		chat.NewTool(Search, "Search the workspace's text files for a regular expression (RE2 syntax), like grep -rn. Returns matching lines with their paths and line numbers, up to a limit.", ts.search),
		run,
	}
}

// resolve checks a path the model gave and returns its virtual path under
// the workspace root. Relative paths are relative to the root; an absolute
// path must lie under it. ".." may not climb out.
func resolve(h sandbox.Handle, p string) (string, error) {
	root := h.WorkspaceRoot()
	if root == "" {
		root = sandbox.DefaultRoot
	}
	p = strings.TrimSpace(p)
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	if p == "" || p == "." {
		return root, nil
	}
	var full string
	if strings.HasPrefix(p, "/") {
		full = path.Clean(p)
	} else {
		full = path.Join(root, p)
	}
	if full != root && !strings.HasPrefix(full, root+"/") {
		return "", fmt.Errorf("path %q is outside the workspace %s; use a path relative to the workspace root", p, root)
	}
	return full, nil
}

// rel returns a virtual path relative to the workspace root.
func rel(h sandbox.Handle, full string) string {
	root := h.WorkspaceRoot()
	if root == "" {
		root = sandbox.DefaultRoot
	}
	if full == root {
		return "."
	}
	return strings.TrimPrefix(full, root+"/")
}

// fsError rewords a provider error for the model.
func fsError(op, p string, err error) error {
	if errors.Is(err, sandbox.ErrOutsideRoot) {
		return fmt.Errorf("%s %s: the path leads outside the workspace (through a symbolic link)", op, p)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}
