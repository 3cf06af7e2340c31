package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/goai-sdk/goai/sandbox"
)

// ListFilesInput is list_files' input.
type ListFilesInput struct {
	Path      string `json:"path,omitempty" jsonschema:"directory relative to the workspace root; default the root"`
	Recursive *bool  `json:"recursive,omitempty" jsonschema:"list subdirectories too; default true"`
}

// Entry is one listed file or directory.
type Entry struct {
	Path string `json:"path"`
	Type string `json:"type"` // "file", "dir", "symlink", "other"
	Size int64  `json:"size,omitempty"`
}

// ListFilesOutput is list_files' result.
type ListFilesOutput struct {
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated,omitempty"`
}

func (ts *toolset) listFiles(ctx context.Context, in ListFilesInput) (ListFilesOutput, error) {
	h, err := ts.handle(ctx)
	if err != nil {
		return ListFilesOutput{}, err
	}
	dir, err := resolve(h, in.Path)
	if err != nil {
		return ListFilesOutput{}, err
	}
	recursive := in.Recursive == nil || *in.Recursive
	out := ListFilesOutput{Entries: []Entry{}}
	lst, _ := h.FS().(sandbox.Lstater)
	var walk func(d string) error
	walk = func(d string) error {
		ents, err := h.FS().ReadDir(ctx, d)
		if err != nil {
			return err
		}
		slices.SortFunc(ents, func(a, b sandbox.DirEntry) int { return strings.Compare(a.Name, b.Name) })
		for _, e := range ents {
			if len(out.Entries) >= ts.opts.MaxListEntries {
				out.Truncated = true
				return nil
			}
			full := path.Join(d, e.Name)
			ent := Entry{Path: rel(h, full), Type: string(e.Type)}
			if e.Type == sandbox.EntryDir && slices.Contains(ts.opts.Ignore, e.Name) {
				continue
			}
			if e.Type == sandbox.EntryFile && lst != nil {
				if fi, err := lst.Lstat(ctx, full); err == nil && fi != nil {
					ent.Size = fi.Size
				}
			}
			out.Entries = append(out.Entries, ent)
			if e.Type == sandbox.EntryDir && recursive {
				if err := walk(full); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(dir); err != nil {
		return ListFilesOutput{}, fsError("list", rel(h, dir), err)
	}
	return out, nil
}

// readText reads a workspace file that must be small enough and text.
func (ts *toolset) readText(ctx context.Context, h sandbox.Handle, full string) (string, error) {
	name := rel(h, full)
	if lst, ok := h.FS().(sandbox.Lstater); ok {
		fi, err := lst.Lstat(ctx, full)
		if err != nil {
			return "", fsError("read", name, err)
		}
		if fi == nil {
			return "", fmt.Errorf("read %s: no such file", name)
		}
		if fi.Type == sandbox.EntryDir {
			return "", fmt.Errorf("read %s: it is a directory (use list_files)", name)
		}
		if fi.Size > ts.opts.MaxFileBytes {
			return "", fmt.Errorf("read %s: the file is %d bytes, larger than the %d-byte limit; use search to find what you need in it", name, fi.Size, ts.opts.MaxFileBytes)
		}
	}
	b, err := h.FS().ReadFile(ctx, full)
	if err != nil {
		if ok, _ := h.FS().Exists(ctx, full); !ok && !errors.Is(err, sandbox.ErrOutsideRoot) {
			return "", fmt.Errorf("read %s: no such file", name)
		}
		return "", fsError("read", name, err)
	}
	if int64(len(b)) > ts.opts.MaxFileBytes {
		return "", fmt.Errorf("read %s: the file is %d bytes, larger than the %d-byte limit; use search to find what you need in it", name, len(b), ts.opts.MaxFileBytes)
	}
	if isBinary(b) {
		return "", fmt.Errorf("read %s: it is a binary file (%d bytes); only text files can be read or edited", name, len(b))
	}
	return string(b), nil
}

// isBinary reports content that is not text: a NUL byte in the first 8 KiB
// or invalid UTF-8.
func isBinary(b []byte) bool {
	head := b[:min(len(b), 8<<10)]
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(b)
}

// ReadFileInput is read_file's input.
type ReadFileInput struct {
	Path      string `json:"path" jsonschema:"file path relative to the workspace root"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"first line to return, 1-based; default 1"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"last line to return, inclusive; default the end of the file"`
}

// ReadFileOutput is read_file's result.
type ReadFileOutput struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line"`
	TotalLines int    `json:"total_lines"`
	// Truncated says the range was cut short; read on from EndLine+1.
	Truncated bool `json:"truncated,omitempty"`
}

func (ts *toolset) readFile(ctx context.Context, in ReadFileInput) (ReadFileOutput, error) {
	h, err := ts.handle(ctx)
	if err != nil {
		return ReadFileOutput{}, err
	}
	full, err := resolve(h, in.Path)
	if err != nil {
		return ReadFileOutput{}, err
	}
	text, err := ts.readText(ctx, h, full)
	if err != nil {
		return ReadFileOutput{}, err
	}
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	start, end := in.StartLine, in.EndLine
	if start <= 0 {
		start = 1
	}
	if end <= 0 || end > total {
		end = total
	}
	if in.StartLine < 0 || in.EndLine < 0 {
		return ReadFileOutput{}, fmt.Errorf("read %s: line numbers start at 1", rel(h, full))
	}
	if start > total && total > 0 || start > end && total > 0 {
		return ReadFileOutput{}, fmt.Errorf("read %s: lines %d-%d are out of range; the file has %d lines", rel(h, full), in.StartLine, in.EndLine, total)
	}
	out := ReadFileOutput{Path: rel(h, full), StartLine: start, TotalLines: total}
	var b strings.Builder
	last := start - 1
	for i := start; i <= end; i++ {
		l := lines[i-1]
		if b.Len()+len(l) > ts.opts.MaxReadBytes {
			out.Truncated = true
			if i == start { // one huge line: cut it at a rune boundary
				cut := ts.opts.MaxReadBytes
				for cut > 0 && !utf8.RuneStart(l[cut]) {
					cut--
				}
				b.WriteString(l[:cut])
				last = i
			}
			break
		}
		b.WriteString(l)
		last = i
	}
	out.Content, out.EndLine = b.String(), last
	if total == 0 {
		out.StartLine, out.EndLine = 0, 0
	}
	return out, nil
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	Path    string `json:"path" jsonschema:"file path relative to the workspace root"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

// WriteFileOutput is write_file's result.
type WriteFileOutput struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

func (ts *toolset) writeFile(ctx context.Context, in WriteFileInput) (WriteFileOutput, error) {
	h, err := ts.handle(ctx)
	if err != nil {
		return WriteFileOutput{}, err
	}
	full, err := ts.writable(h, in.Path)
	if err != nil {
		return WriteFileOutput{}, err
	}
	name := rel(h, full)
	if len(in.Content) > ts.opts.MaxWriteBytes {
		return WriteFileOutput{}, fmt.Errorf("write %s: the content is %d bytes, more than the %d-byte limit", name, len(in.Content), ts.opts.MaxWriteBytes)
	}
	if lst, ok := h.FS().(sandbox.Lstater); ok {
		if fi, err := lst.Lstat(ctx, full); err == nil && fi != nil && fi.Type == sandbox.EntryDir {
			return WriteFileOutput{}, fmt.Errorf("write %s: it is a directory", name)
		}
	}
	existed, err := h.FS().Exists(ctx, full)
	if err != nil {
		return WriteFileOutput{}, fsError("write", name, err)
	}
	if err := h.FS().MkdirAll(ctx, path.Dir(full)); err != nil {
		return WriteFileOutput{}, fsError("write", name, err)
	}
	if err := h.FS().WriteFile(ctx, full, []byte(in.Content), 0o644); err != nil {
		return WriteFileOutput{}, fsError("write", name, err)
	}
	return WriteFileOutput{Path: name, Bytes: len(in.Content), Created: !existed}, nil
}

// writable resolves a path the tools may write: inside the workspace, not
// the root itself, not inside .git.
func (ts *toolset) writable(h sandbox.Handle, p string) (string, error) {
	full, err := resolve(h, p)
	if err != nil {
		return "", err
	}
	name := rel(h, full)
	if name == "." {
		return "", fmt.Errorf("path %q names the workspace root, not a file", p)
	}
	if name == ".git" || strings.HasPrefix(name, ".git/") {
		return "", fmt.Errorf("path %q is inside .git, which the tools do not modify", p)
	}
	return full, nil
}

// EditFileInput is edit_file's input.
type EditFileInput struct {
	Path       string `json:"path" jsonschema:"file path relative to the workspace root"`
	OldText    string `json:"old_text" jsonschema:"the exact text to replace, including whitespace; must occur exactly once unless replace_all"`
	NewText    string `json:"new_text" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_text"`
}

// EditFileOutput is edit_file's result.
type EditFileOutput struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

func (ts *toolset) editFile(ctx context.Context, in EditFileInput) (EditFileOutput, error) {
	h, err := ts.handle(ctx)
	if err != nil {
		return EditFileOutput{}, err
	}
	full, err := ts.writable(h, in.Path)
	if err != nil {
		return EditFileOutput{}, err
	}
	name := rel(h, full)
	if in.OldText == "" {
		return EditFileOutput{}, fmt.Errorf("edit %s: old_text is empty; to create or overwrite a file use write_file", name)
	}
	text, err := ts.readText(ctx, h, full)
	if err != nil {
		return EditFileOutput{}, err
	}
	n := strings.Count(text, in.OldText)
	switch {
	case n == 0:
		hint := ""
		if strings.Contains(strings.Join(strings.Fields(text), " "), strings.Join(strings.Fields(in.OldText), " ")) {
			hint = " (it does occur with different whitespace or line breaks: copy it exactly, e.g. from read_file)"
		}
		return EditFileOutput{}, fmt.Errorf("edit %s: old_text was not found in the file%s; nothing was changed", name, hint)
	case n > 1 && !in.ReplaceAll:
		return EditFileOutput{}, fmt.Errorf("edit %s: old_text occurs %d times; include more surrounding lines to make it unique, or set replace_all; nothing was changed", name, n)
	}
	var next string
	if in.ReplaceAll {
		next = strings.ReplaceAll(text, in.OldText, in.NewText)
	} else {
		next = strings.Replace(text, in.OldText, in.NewText, 1)
	}
	if len(next) > ts.opts.MaxWriteBytes {
		return EditFileOutput{}, fmt.Errorf("edit %s: the result would be %d bytes, more than the %d-byte limit; nothing was changed", name, len(next), ts.opts.MaxWriteBytes)
	}
	if err := h.FS().WriteFile(ctx, full, []byte(next), 0o644); err != nil {
		return EditFileOutput{}, fsError("edit", name, err)
	}
	return EditFileOutput{Path: name, Replacements: n}, nil
}

// SearchInput is search's input.
type SearchInput struct {
	Pattern    string `json:"pattern" jsonschema:"regular expression (RE2 syntax) matched against each line"`
	Path       string `json:"path,omitempty" jsonschema:"file or directory to search, relative to the workspace root; default the root"`
	Glob       string `json:"glob,omitempty" jsonschema:"only files whose name matches this glob, e.g. *.go"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
}

// Match is one matching line.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchOutput is search's result.
type SearchOutput struct {
	Matches []Match `json:"matches"`
	// Truncated says the limit was reached; narrow the search.
	Truncated bool `json:"truncated,omitempty"`
	// Skipped counts binary and oversized files not searched.
	Skipped int `json:"skipped,omitempty"`
}

// maxMatchLine bounds a returned line.
const maxMatchLine = 300

// maxSearchFiles bounds how many files one search reads.
const maxSearchFiles = 5000

func (ts *toolset) search(ctx context.Context, in SearchInput) (SearchOutput, error) {
	h, err := ts.handle(ctx)
	if err != nil {
		return SearchOutput{}, err
	}
	if in.Pattern == "" {
		return SearchOutput{}, errors.New("search: pattern is empty")
	}
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return SearchOutput{}, fmt.Errorf("search: pattern %q is not a valid RE2 regular expression: %v", in.Pattern, err)
	}
	if in.Glob != "" {
		if _, err := path.Match(in.Glob, ""); err != nil {
			return SearchOutput{}, fmt.Errorf("search: glob %q is malformed", in.Glob)
		}
	}
	start, err := resolve(h, in.Path)
	if err != nil {
		return SearchOutput{}, err
	}
	out := SearchOutput{Matches: []Match{}}
	files := 0
	lst, _ := h.FS().(sandbox.Lstater)
	searchFile := func(full string) error {
		if in.Glob != "" {
			if ok, _ := path.Match(in.Glob, path.Base(full)); !ok {
				return nil
			}
		}
		files++
		if files > maxSearchFiles {
			out.Truncated = true
			return errStop
		}
		if lst != nil {
			if fi, err := lst.Lstat(ctx, full); err != nil || fi == nil || fi.Size > ts.opts.MaxFileBytes {
				out.Skipped++
				return nil
			}
		}
		b, err := h.FS().ReadFile(ctx, full)
		if err != nil || int64(len(b)) > ts.opts.MaxFileBytes || isBinary(b) {
			out.Skipped++
			return nil
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if len(out.Matches) >= ts.opts.MaxSearchMatches {
				out.Truncated = true
				return errStop
			}
			if len(line) > maxMatchLine {
				cut := maxMatchLine
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
				line = line[:cut] + "…"
			}
			out.Matches = append(out.Matches, Match{Path: rel(h, full), Line: i + 1, Text: line})
		}
		return nil
	}
	var walk func(d string) error
	walk = func(d string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := h.FS().ReadDir(ctx, d)
		if err != nil {
			return err
		}
		slices.SortFunc(ents, func(a, b sandbox.DirEntry) int { return strings.Compare(a.Name, b.Name) })
		for _, e := range ents {
			full := path.Join(d, e.Name)
			switch e.Type {
			case sandbox.EntryDir:
				if slices.Contains(ts.opts.Ignore, e.Name) {
					continue
				}
				if err := walk(full); err != nil {
					return err
				}
			case sandbox.EntryFile:
				if err := searchFile(full); err != nil {
					return err
				}
			}
		}
		return nil
	}
	isDir := true
	if lst != nil {
		fi, err := lst.Lstat(ctx, start)
		if err != nil {
			return SearchOutput{}, fsError("search", rel(h, start), err)
		}
		if fi == nil {
			return SearchOutput{}, fmt.Errorf("search %s: no such file or directory", rel(h, start))
		}
		isDir = fi.Type == sandbox.EntryDir
	}
	if isDir {
		err = walk(start)
	} else {
		err = searchFile(start)
	}
	if err != nil && !errors.Is(err, errStop) {
		return SearchOutput{}, fsError("search", rel(h, start), err)
	}
	return out, nil
}

var errStop = errors.New("stop")
