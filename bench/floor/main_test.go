package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnswer reads one answer: its events in order, each delta numbered
// and every event stamped.
func TestAnswer(t *testing.T) {
	srv := httptest.NewServer(answer(3, 0))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			Type      string `json:"type"`
			Delta     string `json:"delta"`
			Timestamp int64  `json:"timestamp"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if e.Timestamp <= 0 {
			t.Errorf("event %s has no timestamp", data)
		}
		got = append(got, e.Type+e.Delta)
	}
	want := "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENTw0  TEXT_MESSAGE_CONTENTw1  TEXT_MESSAGE_CONTENTw2  TEXT_MESSAGE_END RUN_FINISHED"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("events\n got %s\nwant %s", g, want)
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
