package main

import (
	"fmt"
	"strings"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/harness"
	"github.com/goai-sdk/goai/workspace"
)

// commandPolicy is the policy of the agent's commands (nil for plain chat
// or the default, ask for every command).
func (a *agent) commandPolicy() *workspace.Policy {
	if a == nil {
		return nil
	}
	return a.policy
}

// harnessJournalDir keeps agent journals inside the workspace's .git
// directory: out of git's and the watcher's view, and visible to every
// command of the sandbox (bubblewrap gives each command its own /tmp).
const harnessJournalDir = ".git/goai-runs"

// harnessHomeDir is a coding agent's home directory, also inside .git.
const harnessHomeDir = ".git/goai-home"

// harnessModel resolves the coding-agent models of GOAI_MODEL:
// claude-code:MODEL, codex:MODEL and acp:COMMAND. ok is false for any
// other model. The agent runs in the thread's sandbox, which must let it
// reach its model API; its keys and base URLs come from the environment.
//
// policy decides the agent's shell commands (nil: ask for every command,
// which an agent mid-turn cannot do, so it may edit files but run nothing
// the policy does not allow).
//
// bridgeHost is where the agent reaches the tool bridge ("" for the host's
// loopback).
func harnessModel(model string, getenv func(string) string, policy *workspace.Policy, bridgeHost string) (a *harness.Adapter, desc string, ok bool, err error) {
	if policy == nil {
		policy = &workspace.Policy{}
	}
	kind, arg, found := strings.Cut(model, ":")
	if !found {
		return nil, "", false, nil
	}
	pass := func(keys ...string) map[string]string {
		env := map[string]string{}
		for _, k := range keys {
			if v := getenv(k); v != "" {
				env[k] = v
			}
		}
		return env
	}
	opts := harness.Options{Journal: true, JournalDir: harnessJournalDir, BridgeHost: bridgeHost}
	switch kind {
	case "claude-code":
		opts.Env = pass("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
		// Its home (sessions) lives in the workspace, so a turn that
		// continues after an approval resumes the agent's session.
		cc := harness.ClaudeCode{Binary: envOr("GOAI_CLAUDE_BIN", "claude"), Policy: policy, Home: harnessHomeDir}
		return harness.New(cc, arg, opts), "Claude Code " + arg, true, nil
	case "codex":
		// Codex takes no per-command rules: its commands run unchecked
		// inside the sandbox, which stays the boundary.
		opts.Env = pass("OPENAI_API_KEY", "OPENAI_BASE_URL")
		return harness.New(harness.Codex{Binary: envOr("GOAI_CODEX_BIN", "codex")}, arg, opts), "Codex " + arg, true, nil
	case "acp":
		if strings.TrimSpace(arg) == "" {
			return nil, "", true, fmt.Errorf("acp: needs the command that starts the agent (acp:COMMAND)")
		}
		opts.Env = pass("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY")
		opts.Journal = false // a conversation over stdin cannot be journaled
		return harness.New(harness.ACP{Command: arg, Policy: policy}, "", opts), "ACP agent " + arg, true, nil
	}
	return nil, "", false, nil
}

// isHarness reports whether opts run a coding agent, which brings its own
// tools: the workspace tools are not offered to it.
func isHarness(opts chat.Options) bool {
	_, ok := opts.Adapter.(*harness.Adapter)
	return ok
}

// allowNetwork lets the sandbox's commands reach the network when the model
// is a coding agent, which calls its model API from inside the sandbox. A
// docker sandbox gets the network GOAI_DOCKER_NETWORK names; without one an
// agent could not reach its model, which is refused at startup.
func (a *agent) allowNetwork(model string) error {
	if a == nil {
		return nil
	}
	if _, _, ok, _ := harnessModel(model, func(string) string { return "" }, nil, ""); !ok {
		return nil
	}
	a.network = true
	if a.kind == "docker" && (a.dockerNet == "" || a.dockerNet == "none") {
		return fmt.Errorf("a coding agent in a docker sandbox calls its model from inside the container: give the container a network with GOAI_DOCKER_NETWORK (for example bridge, or host for a model on this machine's loopback)")
	}
	return nil
}

// dockerHostAlias is the name a docker sandbox reaches the host by (mapped
// to the host gateway in the container).
const dockerHostAlias = "host.docker.internal"

// bridgeHost is where an agent in the sandbox reaches the host's tool
// bridge: the host's loopback unless the agent runs in a docker container
// on a network of its own.
func (a *agent) bridgeHost() string {
	if a == nil || a.kind != "docker" || a.dockerNet == "" || a.dockerNet == "none" || a.dockerNet == "host" {
		return ""
	}
	return dockerHostAlias
}

// extraHosts maps dockerHostAlias to the host in a container that reaches
// the host's tool bridge by that name.
func (a *agent) extraHosts() []string {
	if a.bridgeHost() == dockerHostAlias {
		return []string{dockerHostAlias + ":host-gateway"}
	}
	return nil
}
