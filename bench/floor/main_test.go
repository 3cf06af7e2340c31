package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadReadsTheFloor drives the floor with bench/load, the client it
// is for: every stream whole and in order, every delta stamped.
func TestLoadReadsTheFloor(t *testing.T) {
	srv := httptest.NewServer(answer(7, 0))
	defer srv.Close()
	out, err := exec.Command("go", "run", "../load", "-url", srv.URL, "-clients", "3", "-runs", "2",
		"-tokens", "7", "-json").Output()
	if err != nil {
		t.Fatalf("bench/load: %v\n%s", err, out)
	}
	var rep struct {
		Stamped int `json:"stamped_tokens"`
		Tally   struct {
			Streams, Failed, Tokens, Lost, Duplicated, Reordered, Protocol, RunErrors int
		} `json:"tally"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench/load's report: %v\n%s", err, out)
	}
	tl := rep.Tally
	if tl.Streams != 6 || tl.Failed+tl.Lost+tl.Duplicated+tl.Reordered+tl.Protocol+tl.RunErrors != 0 || tl.Tokens != 42 || rep.Stamped != 42 {
		t.Errorf("bench/load saw %+v, %d stamped: want 6 whole streams of 7 stamped tokens", tl, rep.Stamped)
	}
}

// TestFromScenario takes the tokens and pacing of a scenario bench/load
// writes.
func TestFromScenario(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sc.json")
	cmd := exec.Command("go", "run", "../load", "-write-scenario", file, "-tokens", "7", "-delay-ms", "10", "-tool-every", "3")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	tokens, delayMs, err := fromScenario(file)
	if err != nil || tokens != 7 || delayMs != 10 {
		t.Errorf("fromScenario = %d, %d, %v; want 7, 10", tokens, delayMs, err)
	}
	if err := os.WriteFile(file, []byte(`{"turns":[[{"type":"RUN_STARTED"}]]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fromScenario(file); err == nil || !strings.Contains(err.Error(), "no text turn") {
		t.Errorf("a scenario without text: %v", err)
	}
}
