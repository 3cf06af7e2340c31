package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustNormalize(t *testing.T, stream, format string) string {
	t.Helper()
	out, err := Normalize([]byte(stream), format)
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	return string(out)
}

func TestPlaceholderOrderOfFirstAppearance(t *testing.T) {
	stream := "" +
		`data: {"type":"TOOL_CALL_RESULT","messageId":"msg-1796207169091-8nufqik","toolCallId":"call_1","content":"{}"}` + "\n\n" +
		`data: {"type":"RUN_STARTED","runId":"chat-1796207171374-v17aefp","threadId":"thread-conf"}` + "\n\n" +
		`data: {"type":"TOOL_CALL_RESULT","messageId":"msg-1796207169091-8nufqik","toolCallId":"call_2","content":"{}"}` + "\n\n" +
		`data: {"type":"MESSAGES_SNAPSHOT","messages":[{"id":"snapshot_chat-1796207171374-v17aefp_0","role":"user","content":"hi"},{"id":"msg-1796207177010-xpigz","role":"assistant"}]}` + "\n\n"
	got := mustNormalize(t, stream, "sse")
	want := "" +
		`{"content":"{}","messageId":"<id1>","toolCallId":"call_1","type":"TOOL_CALL_RESULT"}` + "\n" +
		`{"runId":"<id2>","threadId":"thread-conf","type":"RUN_STARTED"}` + "\n" +
		`{"content":"{}","messageId":"<id1>","toolCallId":"call_2","type":"TOOL_CALL_RESULT"}` + "\n" +
		`{"messages":[{"content":"hi","id":"snapshot_<id2>_0","role":"user"},{"id":"<id3>","role":"assistant"}],"type":"MESSAGES_SNAPSHOT"}` + "\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s\ndiff:\n%s", got, want, Diff([]byte(want), []byte(got)))
	}
}

func TestPlaceholderNumberingIgnoresProducerKeyOrder(t *testing.T) {
	a := `data: {"type":"X","runId":"run-1764670000000-aaaa","messageId":"msg-1764670000000-bbbb"}` + "\n\n"
	b := `data: {"messageId":"msg-1764670000000-cccc","type":"X","runId":"run-1764670000000-dddd"}` + "\n\n"
	if na, nb := mustNormalize(t, a, "sse"), mustNormalize(t, b, "sse"); na != nb {
		t.Fatalf("key order changed placeholders:\n%s\n%s", na, nb)
	}
}

func TestScenarioIDsKeptLiterally(t *testing.T) {
	got := mustNormalize(t, `data: {"type":"RUN_STARTED","runId":"run-1","threadId":"thread-conf","parentRunId":"run-0"}`+"\n\n", "sse")
	want := `{"parentRunId":"run-0","runId":"run-1","threadId":"thread-conf","type":"RUN_STARTED"}` + "\n"
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestEmbeddedIDsInTextAndKeys(t *testing.T) {
	stream := `data: {"type":"CUSTOM","name":"x","value":{"note":"see fallback-1796207177008-86bs5c7ri8d and msg-1796207177008-abc","map":{"msg-1796207177008-abc":1},"word":"xmsg-1796207177008-abc"}}` + "\n\n"
	got := mustNormalize(t, stream, "sse")
	// keys sorted: map < name < type < value; inside value: map, note, word.
	want := `{"name":"x","type":"CUSTOM","value":{"map":{"<id1>":1},"note":"see <id2> and <id1>","word":"xmsg-1796207177008-abc"}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestTimestampAndCreatedAtRemovedEverywhere(t *testing.T) {
	stream := `data: {"type":"MESSAGES_SNAPSHOT","timestamp":1796207167773,"messages":[{"id":"m1","metadata":{"tanstack":{"createdAt":"2026-12-02T10:26:07.770Z"}},"role":"assistant","content":"x","timestamp":5}]}` + "\n\n"
	got := mustNormalize(t, stream, "sse")
	want := `{"messages":[{"content":"x","id":"m1","role":"assistant"}],"type":"MESSAGES_SNAPSHOT"}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestEmptyObjectsKeptUnlessEmptiedByDrop(t *testing.T) {
	stream := `data: {"type":"CUSTOM","value":{},"metadata":{"tanstack":{"createdAt":"x"},"other":{"timestamp":1,"keep":true}}}` + "\n\n"
	got := mustNormalize(t, stream, "sse")
	want := `{"metadata":{"other":{"keep":true}},"type":"CUSTOM","value":{}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestKeysSortedAndNoHTMLEscaping(t *testing.T) {
	stream := `data: {"z":1,"type":"CUSTOM","a":{"y":[{"d":1,"c":2}],"b":"<tag> & co"},"n":0.0042}` + "\n\n"
	got := mustNormalize(t, stream, "sse")
	want := `{"a":{"b":"<tag> & co","y":[{"c":2,"d":1}]},"n":0.0042,"type":"CUSTOM","z":1}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestSSETransportLinesIgnored(t *testing.T) {
	stream := "" +
		": keep-alive comment\r\n\r\n" +
		"id: 17\r\n" +
		"event: message\r\n" +
		"retry: 1000\r\n" +
		"data: {\"type\":\"RUN_STARTED\",\"runId\":\"run-1\",\"threadId\":\"t\"}\r\n\r\n" +
		"id: 18\n" +
		"data:{\"type\":\"RUN_FINISHED\",\n" +
		"data: \"runId\":\"run-1\",\"threadId\":\"t\"}\n\n"
	got := mustNormalize(t, stream, "sse")
	want := "" +
		`{"runId":"run-1","threadId":"t","type":"RUN_STARTED"}` + "\n" +
		`{"runId":"run-1","threadId":"t","type":"RUN_FINISHED"}` + "\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	withIDs := mustNormalize(t, "id: 1\ndata: {\"type\":\"A\"}\n\nid: 2\ndata: {\"type\":\"B\"}\n\n", "sse")
	without := mustNormalize(t, "data: {\"type\":\"A\"}\n\ndata: {\"type\":\"B\"}\n\n", "sse")
	if withIDs != without {
		t.Fatalf("id: lines changed the result:\n%s\n%s", withIDs, without)
	}
}

func TestSSEErrors(t *testing.T) {
	for name, stream := range map[string]string{
		"unterminated": "data: {\"type\":\"A\"}\n",
		"not json":     "data: [DONE]\n\n",
		"bad field":    "bogus: 1\n\n",
	} {
		if _, err := Normalize([]byte(stream), "sse"); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	if _, err := Normalize([]byte(""), "xml"); err == nil {
		t.Error("unknown format: want error")
	}
}

func TestNDJSON(t *testing.T) {
	stream := "" +
		`{"type":"RUN_STARTED","runId":"run-1","threadId":"t","timestamp":1}` + "\n" +
		"\n" +
		`{"id":"0-5","chunk":{"type":"TOOL_CALL_RESULT","messageId":"msg-1796207169091-8nufqik","toolCallId":"c","content":"x"}}` + "\n"
	got := mustNormalize(t, stream, "ndjson")
	want := "" +
		`{"runId":"run-1","threadId":"t","type":"RUN_STARTED"}` + "\n" +
		`{"content":"x","messageId":"<id1>","toolCallId":"c","type":"TOOL_CALL_RESULT"}` + "\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	sse := mustNormalize(t, "data: "+`{"type":"RUN_STARTED","runId":"run-1","threadId":"t"}`+"\n\n", "sse")
	nd := mustNormalize(t, `{"type":"RUN_STARTED","runId":"run-1","threadId":"t"}`+"\n", "ndjson")
	if sse != nd {
		t.Fatalf("sse and ndjson disagree: %s vs %s", sse, nd)
	}
}

func TestIDKeysOption(t *testing.T) {
	stream := `data: {"type":"TEXT_MESSAGE_START","messageId":"6f1c-uuid","role":"assistant"}` + "\n\n" +
		`data: {"type":"TEXT_MESSAGE_END","messageId":"6f1c-uuid"}` + "\n\n"
	out, err := NormalizeWith([]byte(stream), "sse", Options{IDKeys: map[string]bool{"messageId": true}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messageId":"<id1>","role":"assistant","type":"TEXT_MESSAGE_START"}` + "\n" +
		`{"messageId":"<id1>","type":"TEXT_MESSAGE_END"}` + "\n"
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
}

// A real interrupt terminal from the reference (scenario 24-no-run-id).
func TestReferenceInterruptFixture(t *testing.T) {
	stream := `data: {"type":"MESSAGES_SNAPSHOT","timestamp":1796207171382,"messages":[{"id":"snapshot_chat-1796207171374-v17aefp_0","role":"user","content":"No runId given"},{"id":"msg-1796207171377-u9lwc78","metadata":{"tanstack":{"createdAt":"2026-12-02T10:26:11.377Z"}},"role":"assistant","toolCalls":[{"id":"call_p1","type":"function","function":{"name":"client_pick","arguments":"{\"options\":[\"x\",\"y\"]}"}}]}]}` + "\n\n" +
		`data: {"type":"RUN_FINISHED","runId":"run-adapter-own","threadId":"thread-conf","timestamp":1796207171381,"outcome":{"type":"interrupt","interrupts":[{"id":"client_tool_call_p1","metadata":{"tanstack:interruptBinding":{"interruptedRunId":"chat-1796207171374-v17aefp","generation":0}}}]}}` + "\n\n"
	got := mustNormalize(t, stream, "sse")
	if strings.Contains(got, "1796207") {
		t.Fatalf("clock or generated id survived:\n%s", got)
	}
	for _, want := range []string{`"id":"snapshot_<id1>_0"`, `"id":"<id2>"`, `"interruptedRunId":"<id1>"`, `"runId":"run-adapter-own"`, `"id":"client_tool_call_p1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in:\n%s", want, got)
		}
	}
}

func TestNormalizeJSONArray(t *testing.T) {
	out, err := NormalizeJSONArray([]byte(`[{"hook":"setup","phase":"init","iteration":0},{"iteration":0,"hook":"onChunk","detail":{"type":"RUN_STARTED"},"phase":"modelStream"}]`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"hook":"setup","iteration":0,"phase":"init"}` + "\n" +
		`{"detail":{"type":"RUN_STARTED"},"hook":"onChunk","iteration":0,"phase":"modelStream"}` + "\n"
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	if _, err := NormalizeJSONArray([]byte(`{}`), Options{}); err == nil {
		t.Fatal("want error for non-array")
	}
}

func TestDiff(t *testing.T) {
	a := []byte("A\nB\nC\nD\nE\nF\nG\n")
	if d := Diff(a, a); d != "" {
		t.Fatalf("equal streams: want empty diff, got %q", d)
	}
	b := []byte("A\nB\nC\nX\nE\nF\nG\nH\n")
	got := Diff(a, b)
	want := "" +
		"@@ a:2 b:2 @@\n" +
		"  B\n" +
		"  C\n" +
		"- D\n" +
		"+ X\n" +
		"  E\n" +
		"  F\n" +
		"  G\n" +
		"+ H\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if d := Diff(nil, []byte("A\n")); d != "@@ a:1 b:1 @@\n+ A\n" {
		t.Fatalf("diff from empty: %q", d)
	}
}

// TestNormalizedRunsAgree checks that normalization removes all run-to-run
// nondeterminism: set GOAI_REFOUT_A and GOAI_REFOUT_B to two directories
// holding <scenario>.sse outputs of separate runs (of the reference, or of the
// reference and goai) and every pair must normalize identically.
func TestNormalizedRunsAgree(t *testing.T) {
	dirA, dirB := os.Getenv("GOAI_REFOUT_A"), os.Getenv("GOAI_REFOUT_B")
	if dirA == "" || dirB == "" {
		t.Skip("set GOAI_REFOUT_A and GOAI_REFOUT_B to compare two output directories")
	}
	files, err := filepath.Glob(filepath.Join(dirA, "*.sse"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no .sse files in %s", dirA)
	}
	for _, fa := range files {
		name := filepath.Base(fa)
		a, err := os.ReadFile(fa)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirB, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		na, err := Normalize(a, "sse")
		if err != nil {
			t.Errorf("%s (A): %v", name, err)
			continue
		}
		nb, err := Normalize(b, "sse")
		if err != nil {
			t.Errorf("%s (B): %v", name, err)
			continue
		}
		if d := Diff(na, nb); d != "" {
			t.Errorf("%s differs:\n%s", name, d)
		}
	}
}
