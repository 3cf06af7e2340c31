package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version implements `goai version`: the module version (a tag when built
// with `go install ...@vX.Y.Z`, "(devel)" in a checkout) and the VCS
// revision the go command stamps into binaries built from a git checkout.
func version(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "goai version: takes no arguments")
		return 2
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "goai (no build information)")
		return 0
	}
	fmt.Fprintln(stdout, versionLine(info))
	return 0
}

func versionLine(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	rev, at, dirty := "unknown", "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	return fmt.Sprintf("goai %s %s revision %s%s%s %s", info.Main.Path, v, rev, dirty, at, info.GoVersion)
}
