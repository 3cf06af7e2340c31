package workspace

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Decision is what a Policy says about a command.
type Decision string

const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// Policy decides which commands run_command may run. Patterns match the
// whole trimmed command; `*` matches any run of characters and every other
// character is literal. Deny beats ask, ask beats allow, and a command no
// pattern matches gets Default (Ask when empty).
//
// Scripts are named commands (as in a package.json): a command and a
// pattern each stand for themselves, their script's command and every
// script name with that command, so allowing "test" also allows the
// command the "test" script runs.
type Policy struct {
	Allow   []string          `json:"allow,omitempty"`
	Ask     []string          `json:"ask,omitempty"`
	Deny    []string          `json:"deny,omitempty"`
	Default Decision          `json:"default,omitempty"`
	Scripts map[string]string `json:"scripts,omitempty"`
}

// policyFile is the file format: the commands section of a sandbox policy.
type policyFile struct {
	Commands *struct {
		Allow []string `json:"allow"`
		Ask   []string `json:"ask"`
		Deny  []string `json:"deny"`
	} `json:"commands"`
	Default Decision          `json:"default"`
	Scripts map[string]string `json:"scripts"`
}

// ParsePolicy reads a policy from JSON:
//
//	{"commands": {"allow": ["ls *", "go test *"], "ask": ["git push *"], "deny": ["sudo *"]}, "default": "ask"}
func ParsePolicy(data []byte) (*Policy, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var f policyFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("workspace: policy: %w", err)
	}
	p := &Policy{Default: f.Default, Scripts: f.Scripts}
	if f.Commands != nil {
		p.Allow, p.Ask, p.Deny = f.Commands.Allow, f.Commands.Ask, f.Commands.Deny
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadPolicy reads a policy file (see ParsePolicy).
func LoadPolicy(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workspace: policy: %w", err)
	}
	p, err := ParsePolicy(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return p, nil
}

func (p *Policy) validate() error {
	switch p.Default {
	case "", Allow, Ask, Deny:
	default:
		return fmt.Errorf("workspace: policy: default %q is not allow, ask or deny", p.Default)
	}
	for _, list := range [][]string{p.Allow, p.Ask, p.Deny} {
		for _, pat := range list {
			if strings.TrimSpace(pat) == "" {
				return fmt.Errorf("workspace: policy: empty pattern")
			}
		}
	}
	return nil
}

// Evaluate decides cmd. A nil policy asks for every command.
func (p *Policy) Evaluate(cmd string) Decision {
	d, _ := p.Match(cmd)
	return d
}

// Match decides cmd and returns the pattern that decided it ("" when the
// default did).
func (p *Policy) Match(cmd string) (Decision, string) {
	if p == nil {
		return Ask, ""
	}
	def := p.Default
	if def == "" {
		def = Ask
	}
	forms := p.forms(strings.TrimSpace(cmd))
	for _, rule := range []struct {
		d    Decision
		pats []string
	}{{Deny, p.Deny}, {Ask, p.Ask}, {Allow, p.Allow}} {
		for _, pat := range rule.pats {
			for _, pf := range p.forms(strings.TrimSpace(pat)) {
				re := patternRegexp(pf)
				for _, cf := range forms {
					if re.MatchString(cf) {
						return rule.d, pat
					}
				}
			}
		}
	}
	return def, ""
}

// forms expands s into itself, its script's command, and every script
// name whose command is s.
func (p *Policy) forms(s string) []string {
	out := []string{s}
	if v, ok := p.Scripts[s]; ok && v != s {
		out = append(out, strings.TrimSpace(v))
	}
	for name, v := range p.Scripts {
		if strings.TrimSpace(v) == s && name != s {
			out = append(out, name)
		}
	}
	return out
}

// patternRegexp compiles a policy pattern: `*` is any run of characters,
// everything else literal, anchored at both ends.
func patternRegexp(pat string) *regexp.Regexp {
	parts := strings.Split(pat, "*")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	return regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
}
