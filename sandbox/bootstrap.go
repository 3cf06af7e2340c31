package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// BootstrapResult reports what Bootstrap did.
type BootstrapResult struct {
	PackageManager string
	// RanSetup lists the setup commands in declaration order.
	RanSetup []string
}

// Bootstrap prepares a freshly created sandbox from w: secrets into the
// environment, the source (git clone with its exit code checked, or a copy
// of a host directory), AGENTS.md, and the setup steps. Serial steps run on
// one persistent shell, so cd and export carry over.
func Bootstrap(ctx context.Context, h Handle, w *Workspace, logger *slog.Logger) (BootstrapResult, error) {
	logger = orDiscard(logger)
	var res BootstrapResult
	root := w.root()
	if len(w.Secrets) > 0 {
		if err := h.SetEnv(w.Secrets); err != nil {
			return res, fmt.Errorf("sandbox: set secrets: %w", err)
		}
	}
	if err := h.FS().MkdirAll(ctx, root); err != nil {
		return res, fmt.Errorf("sandbox: create workspace root: %w", err)
	}
	switch w.Source.Kind {
	case SourceGit:
		has, err := h.FS().Exists(ctx, joinRoot(root, ".git"))
		if err != nil {
			return res, fmt.Errorf("sandbox: probe .git: %w", err)
		}
		if !has {
			if err := GitClone(ctx, h, root, w.Source); err != nil {
				return res, err
			}
		}
	case SourceLocal:
		if err := copyIn(ctx, h, w.Source.Path, root); err != nil {
			return res, err
		}
	}
	if err := writeAgentsFile(ctx, h, w, root); err != nil {
		return res, err
	}
	res.PackageManager = w.PackageManager
	if res.PackageManager == "" {
		for _, lf := range []struct{ file, pm string }{
			{"pnpm-lock.yaml", "pnpm"}, {"yarn.lock", "yarn"}, {"bun.lockb", "bun"}, {"package-lock.json", "npm"},
		} {
			if ok, _ := h.FS().Exists(ctx, joinRoot(root, lf.file)); ok {
				res.PackageManager = lf.pm
				break
			}
		}
	}
	if len(w.Setup) == 0 {
		return res, nil
	}
	var sh shell
	if h.Capabilities().WritableStdin {
		ps, err := startPersistentShell(ctx, h, root, 0)
		if err != nil {
			return res, err
		}
		defer ps.close()
		sh = ps
	} else {
		sh = newExecShell(h, root)
	}
	for _, step := range w.Setup {
		if !step.Parallel {
			for _, cmd := range step.Commands {
				out, code, err := sh.run(ctx, cmd)
				if errors.Is(err, errShellEnded) && code != 0 {
					return res, &SetupError{Command: cmd, ExitCode: code, Output: tail(out, 1500)}
				}
				if err != nil {
					return res, fmt.Errorf("sandbox: setup %q: %w", cmd, err)
				}
				if code != 0 {
					return res, &SetupError{Command: cmd, ExitCode: code, Output: tail(out, 1500)}
				}
				res.RanSetup = append(res.RanSetup, cmd)
				logDebug(logger, "sandbox setup step ran", "command", cmd)
			}
			continue
		}
		if err := runParallel(ctx, h, sh, root, step.Commands); err != nil {
			return res, err
		}
		res.RanSetup = append(res.RanSetup, step.Commands...)
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func runParallel(ctx context.Context, h Handle, sh shell, root string, cmds []string) error {
	cwd, env, err := sh.forkState(ctx)
	if err != nil {
		return fmt.Errorf("sandbox: fork shell state: %w", err)
	}
	results := make([]ExecResult, len(cmds))
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Go(func() {
			script := env + "\ncd " + Quote(cwd) + " || exit 1\n" + cmd + "\n"
			results[i], errs[i] = h.Exec(ctx, script, ExecOptions{Dir: root})
		})
	}
	wg.Wait()
	for i, cmd := range cmds {
		if errs[i] != nil {
			return fmt.Errorf("sandbox: setup %q: %w", cmd, errs[i])
		}
		if results[i].ExitCode != 0 {
			return &SetupError{Command: cmd, ExitCode: results[i].ExitCode, Output: tail(results[i].Stdout+results[i].Stderr, 1500)}
		}
	}
	return nil
}

// GitClone clones src into dir (a virtual path, which must exist and be
// empty). A token is passed only through the environment. Unlike
// TanStack, a non-zero exit is an error (*CommandError).
func GitClone(ctx context.Context, h Handle, dir string, src Source) error {
	for _, v := range []string{src.URL, src.Ref} {
		if strings.HasPrefix(v, "-") {
			return fmt.Errorf("sandbox: git clone: argument-injection guard: %q", v)
		}
	}
	if src.URL == "" {
		return fmt.Errorf("sandbox: git clone: empty URL")
	}
	var b strings.Builder
	env := map[string]string{}
	if src.Auth != nil {
		user := src.Auth.Username
		if user == "" {
			user = "x-access-token"
		}
		env["GIT_ASKPASS_USER"] = user
		env["GIT_ASKPASS_TOKEN"] = src.Auth.Token
		env["GIT_TERMINAL_PROMPT"] = "0"
		b.WriteString(`git -c credential.helper='!f() { echo "username=${GIT_ASKPASS_USER}"; echo "password=${GIT_ASKPASS_TOKEN}"; }; f' clone `)
	} else {
		b.WriteString("git clone ")
	}
	if src.Ref != "" {
		b.WriteString("--branch " + Quote(src.Ref) + " ")
	}
	depth := src.Depth
	if depth == 0 {
		depth = 1
	}
	if depth > 0 {
		b.WriteString("--depth " + strconv.Itoa(depth) + " --single-branch ")
	}
	b.WriteString("-- " + Quote(src.URL) + " .")
	res, err := h.Exec(ctx, b.String(), ExecOptions{Dir: dir, Env: env})
	if err != nil {
		return fmt.Errorf("sandbox: git clone: %w", err)
	}
	if res.ExitCode != 0 {
		return &CommandError{Command: "git clone", ExitCode: res.ExitCode, Stderr: strings.TrimSpace(res.Stderr)}
	}
	return nil
}

// copyIn copies the host directory src into the sandbox directory dst
// through the handle's FS. Symlinks and special files are skipped.
func copyIn(ctx context.Context, h Handle, src, dst string) error {
	if src == "" {
		return fmt.Errorf("sandbox: local source: empty path")
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("sandbox: copy local source: %w", err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := dst
		if rel != "." {
			target = path.Join(dst, filepath.ToSlash(rel))
		}
		switch {
		case d.IsDir():
			return h.FS().MkdirAll(ctx, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("sandbox: copy local source: %w", err)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("sandbox: copy local source: %w", err)
			}
			if err := h.FS().WriteFile(ctx, target, data, info.Mode().Perm()); err != nil {
				return fmt.Errorf("sandbox: copy local source: %w", err)
			}
		}
		return nil
	})
}

func writeAgentsFile(ctx context.Context, h Handle, w *Workspace, root string) error {
	content := w.Instructions
	if len(w.Scripts) > 0 {
		var b strings.Builder
		b.WriteString(strings.TrimRight(content, " \t\r\n"))
		b.WriteString("\n\n## Workspace scripts\n")
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range w.Scripts {
				if !yield(k) {
					return
				}
			}
		}) {
			b.WriteString("\n- " + name + " → " + w.Scripts[name])
		}
		content = b.String()
	}
	if content == "" {
		return nil
	}
	if err := h.FS().WriteFile(ctx, joinRoot(root, "AGENTS.md"), []byte(content), 0o644); err != nil {
		return fmt.Errorf("sandbox: write AGENTS.md: %w", err)
	}
	for _, link := range []string{"CLAUDE.md", "GEMINI.md"} {
		res, err := h.Exec(ctx, "ln -s 'AGENTS.md' "+Quote(link), ExecOptions{Dir: root})
		if err == nil && res.ExitCode == 0 {
			continue
		}
		if err := h.FS().WriteFile(ctx, joinRoot(root, link), []byte(content), 0o644); err != nil {
			return fmt.Errorf("sandbox: write %s: %w", link, err)
		}
	}
	return nil
}
