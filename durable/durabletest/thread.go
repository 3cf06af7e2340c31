package durabletest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// richMessages is a transcript with every shape a store must keep intact:
// multi-part user content, thinking with a signature, tool calls with
// approval state and output, tool results, non-ASCII and escaped text.
const richMessages = `[
 {"id":"u1","role":"user","parts":[{"type":"text","content":"Bonjour ü \u2028 \"quoted\" \\ \u0000"},
   {"type":"image","source":{"type":"url","value":"https://example.com/a.png"}}],"createdAt":"2026-01-02T03:04:05.678Z"},
 {"id":"a1","role":"assistant","parts":[
   {"type":"thinking","content":"let me think","signature":"sig-abc=="},
   {"type":"tool-call","id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","input":{"city":"Paris"},
    "state":"approval-responded","approval":{"id":"ap1","needsApproval":true,"approved":true},"output":{"tempC":21.5}},
   {"type":"tool-result","toolCallId":"c1","content":"{\"tempC\":21.5}","state":"complete"},
   {"type":"text","content":"It is 21.5°C."}],"metadata":{"model":"m","nested":{"a":[1,2,{"b":null}]}}}
]`

func jsonEqual(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: stored JSON does not decode: %v (%s)", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func mustLoad(t *testing.T, s durable.ThreadStore, id string) durable.Thread {
	t.Helper()
	th, ok, err := s.LoadThread(ctxT(t), id)
	if err != nil || !ok {
		t.Fatalf("LoadThread(%q) = ok %v, %v; want a stored thread", id, ok, err)
	}
	return th
}

func mustSave(t *testing.T, s durable.ThreadStore, th durable.Thread) {
	t.Helper()
	if err := s.SaveThread(ctxT(t), th); err != nil {
		t.Fatalf("SaveThread(%q): %v", th.ThreadID, err)
	}
}

// Threads runs the thread-store conformance suite (docs/durable.md §6.2,
// "Messages", plus the interrupts hydration reads). newStore must return a
// new, empty store on each call and register its own cleanup.
func Threads(t *testing.T, newStore func(t *testing.T) durable.ThreadStore) {
	sub := func(name string, f func(t *testing.T, s durable.ThreadStore)) {
		t.Run(name, func(t *testing.T) {
			leakCheck(t)
			f(t, newStore(t))
		})
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

	sub("thread_unknown_loads_nothing", func(t *testing.T, s durable.ThreadStore) {
		th, ok, err := s.LoadThread(ctxT(t), "nope")
		if err != nil || ok || th.Messages != nil {
			t.Fatalf("LoadThread(unknown) = %+v, %v, %v; want nothing, false, nil", th, ok, err)
		}
	})

	sub("thread_rich_shapes_round_trip", func(t *testing.T, s durable.ThreadStore) {
		in := durable.Thread{ThreadID: "t ä/1", Messages: json.RawMessage(richMessages), RunID: "r1", UpdatedAt: at}
		mustSave(t, s, in)
		got := mustLoad(t, s, in.ThreadID)
		jsonEqual(t, "messages", got.Messages, in.Messages)
		if got.ThreadID != in.ThreadID || got.RunID != "r1" || got.Interrupts != nil {
			t.Fatalf("loaded %+v", got)
		}
		if !got.UpdatedAt.Equal(durable.Millis(at)) {
			t.Fatalf("UpdatedAt = %v, want %v", got.UpdatedAt, durable.Millis(at))
		}
	})

	sub("thread_owner_round_trips", func(t *testing.T, s durable.ThreadStore) {
		mustSave(t, s, durable.Thread{ThreadID: "t1", Messages: json.RawMessage(`[]`), RunID: "r1", UpdatedAt: at, Owner: "alice"})
		if got := mustLoad(t, s, "t1"); got.Owner != "alice" {
			t.Fatalf("owner %q, want alice", got.Owner)
		}
	})

	sub("thread_owner_without_loading", func(t *testing.T, s durable.ThreadStore) {
		owners, ok := s.(durable.ThreadOwners)
		runs, ok2 := s.(durable.RunStore)
		if !ok || !ok2 {
			t.Skip("the store does not implement durable.ThreadOwners and durable.RunStore")
		}
		ctx := ctxT(t)
		want := func(thread, owner string, found bool) {
			t.Helper()
			got, ok, err := owners.ThreadOwner(ctx, thread)
			if err != nil || got != owner || ok != found {
				t.Fatalf("ThreadOwner(%q) = %q, %v, %v; want %q, %v, nil", thread, got, ok, err, owner, found)
			}
		}
		want("t1", "", false)
		// Runs only: the earliest started run's owner, whatever the order
		// they were recorded in.
		for _, r := range []durable.RunRecord{
			{RunID: "r2", ThreadID: "t1", StartedAt: at.Add(time.Second), Owner: "bob"},
			{RunID: "r1", ThreadID: "t1", StartedAt: at, Owner: "alice"},
			{RunID: "r0", ThreadID: "t2", StartedAt: at.Add(-time.Hour), Owner: "eve"},
		} {
			if _, err := runs.CreateOrResume(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		want("t1", "alice", true)
		want("t2", "eve", true)
		// A saved thread's owner comes first, an unowned one too.
		mustSave(t, s, durable.Thread{ThreadID: "t1", Messages: json.RawMessage(`[]`), RunID: "r2", UpdatedAt: at, Owner: "carol"})
		want("t1", "carol", true)
		mustSave(t, s, durable.Thread{ThreadID: "t2", Messages: json.RawMessage(`[]`), RunID: "r0", UpdatedAt: at})
		want("t2", "", true)
		want("t3", "", false)
	})

	sub("thread_claims", func(t *testing.T, s durable.ThreadStore) {
		claims, ok := s.(durable.ThreadClaimer)
		owners, ok2 := s.(durable.ThreadOwners)
		runs, ok3 := s.(durable.RunStore)
		if !ok || !ok2 || !ok3 {
			t.Skip("the store does not implement durable.ThreadClaimer, durable.ThreadOwners and durable.RunStore")
		}
		ctx := ctxT(t)
		claim := func(thread, owner, want string) {
			t.Helper()
			got, err := claims.ClaimThread(ctx, thread, owner)
			if err != nil || got != want {
				t.Fatalf("ClaimThread(%q, %q) = %q, %v; want %q, nil", thread, owner, got, err, want)
			}
			if o, found, err := owners.ThreadOwner(ctx, thread); err != nil || !found || o != want {
				t.Fatalf("after the claim, ThreadOwner(%q) = %q, %v, %v; want %q, true, nil", thread, o, found, err, want)
			}
		}
		// A new thread is the first claimant's, and stays so.
		claim("new", "alice", "alice")
		claim("new", "bob", "alice")
		th := mustLoad(t, s, "new")
		if th.Owner != "alice" || th.RunID != "" || th.Interrupts != nil || string(bytes.TrimSpace(th.Messages)) != "[]" {
			t.Fatalf("a claimed thread loads as %+v; want alice's, with an empty transcript and no run", th)
		}
		// Saving it later keeps what the save says.
		mustSave(t, s, durable.Thread{ThreadID: "new", Messages: json.RawMessage(richMessages), RunID: "r1", UpdatedAt: at, Owner: "alice"})
		jsonEqual(t, "messages after a claim and a save", mustLoad(t, s, "new").Messages, json.RawMessage(richMessages))
		// A saved thread, owned or not, and a thread with runs only keep
		// their owners; the claim does not overwrite a saved transcript.
		mustSave(t, s, durable.Thread{ThreadID: "saved", Messages: json.RawMessage(richMessages), RunID: "r0", UpdatedAt: at, Owner: "carol"})
		claim("saved", "bob", "carol")
		jsonEqual(t, "messages after a refused claim", mustLoad(t, s, "saved").Messages, json.RawMessage(richMessages))
		mustSave(t, s, durable.Thread{ThreadID: "open", Messages: json.RawMessage(`[]`), RunID: "r0", UpdatedAt: at})
		claim("open", "bob", "")
		if _, err := runs.CreateOrResume(ctx, durable.RunRecord{RunID: "r9", ThreadID: "ran", StartedAt: at, Owner: "eve"}); err != nil {
			t.Fatal(err)
		}
		claim("ran", "bob", "eve")
		if _, err := claims.ClaimThread(ctx, "", "bob"); err == nil {
			t.Fatal("ClaimThread accepted an empty thread id")
		}

		// Of claims racing for one new thread, one wins and every
		// claimant is told the same owner.
		const n = 8
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				got[i], errs[i] = claims.ClaimThread(ctx, "raced", fmt.Sprintf("p%d", i))
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil || got[i] != got[0] || got[0] == "" {
				t.Fatalf("racing claims answered %q (errors %v); want one owner for all", got, errs)
			}
		}
	})

	sub("thread_save_overwrites_and_clears_interrupts", func(t *testing.T, s durable.ThreadStore) {
		pending := json.RawMessage(`[{"id":"approval_c1","reason":"tool_approval","toolCallId":"c1"}]`)
		mustSave(t, s, durable.Thread{ThreadID: "t1", Messages: json.RawMessage(richMessages), RunID: "r1", Interrupts: pending, UpdatedAt: at})
		got := mustLoad(t, s, "t1")
		jsonEqual(t, "interrupts", got.Interrupts, pending)
		short := json.RawMessage(`[{"id":"u2","role":"user","parts":[{"type":"text","content":"next"}]}]`)
		mustSave(t, s, durable.Thread{ThreadID: "t1", Messages: short, RunID: "r2", UpdatedAt: at.Add(time.Second)})
		got = mustLoad(t, s, "t1")
		jsonEqual(t, "messages after overwrite", got.Messages, short)
		if got.RunID != "r2" || got.Interrupts != nil {
			t.Fatalf("after overwrite: run %q interrupts %s; want r2 and none", got.RunID, got.Interrupts)
		}
		mustSave(t, s, durable.Thread{ThreadID: "t1", Messages: json.RawMessage(`[]`), RunID: "r3", UpdatedAt: at})
		if got := mustLoad(t, s, "t1"); string(bytes.TrimSpace(got.Messages)) != "[]" {
			t.Fatalf("empty transcript reads back %s", got.Messages)
		}
	})

	sub("thread_threads_are_independent", func(t *testing.T, s durable.ThreadStore) {
		a := json.RawMessage(`[{"id":"a","role":"user","parts":[]}]`)
		b := json.RawMessage(`[{"id":"b","role":"user","parts":[]}]`)
		mustSave(t, s, durable.Thread{ThreadID: "A", Messages: a, RunID: "ra", UpdatedAt: at})
		mustSave(t, s, durable.Thread{ThreadID: "B", Messages: b, RunID: "rb", UpdatedAt: at})
		jsonEqual(t, "A", mustLoad(t, s, "A").Messages, a)
		jsonEqual(t, "B", mustLoad(t, s, "B").Messages, b)
		if _, ok, _ := s.LoadThread(ctxT(t), "a"); ok {
			t.Fatal("thread ids must be case-sensitive")
		}
	})

	sub("thread_load_returns_a_copy", func(t *testing.T, s durable.ThreadStore) {
		in := json.RawMessage(`[{"id":"x","role":"user","parts":[]}]`)
		mustSave(t, s, durable.Thread{ThreadID: "t", Messages: in, Interrupts: json.RawMessage(`[]`), UpdatedAt: at})
		in[2] = 'X' // the caller's buffer is not the stored one
		got := mustLoad(t, s, "t")
		got.Messages[2], got.Interrupts[0] = 'Y', '{'
		again := mustLoad(t, s, "t")
		jsonEqual(t, "messages", again.Messages, json.RawMessage(`[{"id":"x","role":"user","parts":[]}]`))
		jsonEqual(t, "interrupts", again.Interrupts, json.RawMessage(`[]`))
	})

	sub("thread_invalid_input_is_rejected_and_stores_nothing", func(t *testing.T, s durable.ThreadStore) {
		for _, th := range []durable.Thread{
			{ThreadID: "", Messages: json.RawMessage(`[]`)},
			{ThreadID: "bad\nid", Messages: json.RawMessage(`[]`)},
			{ThreadID: "t", Messages: nil},
			{ThreadID: "t", Messages: json.RawMessage(`{"id":1}`)},
			{ThreadID: "t", Messages: json.RawMessage(`[1,`)},
			{ThreadID: "t", Messages: json.RawMessage(`[]`), Interrupts: json.RawMessage(`{}`)},
		} {
			if err := s.SaveThread(ctxT(t), th); err == nil {
				t.Errorf("SaveThread(%q, %q, %q) accepted", th.ThreadID, th.Messages, th.Interrupts)
			}
		}
		if _, ok, err := s.LoadThread(ctxT(t), "t"); ok || err != nil {
			t.Fatalf("a rejected save stored something: ok %v, %v", ok, err)
		}
	})

	sub("thread_concurrent_saves_leave_one_whole_version", func(t *testing.T, s durable.ThreadStore) {
		const n = 16
		var wg sync.WaitGroup
		want := map[string]string{} // messages -> run id
		for i := range n {
			msgs := json.RawMessage(fmt.Sprintf(`[{"id":"m%d","role":"user","parts":[{"type":"text","content":"%d"}]}]`, i, i))
			run := fmt.Sprint("r", i)
			want[string(msgs)] = run
			wg.Go(func() {
				if err := s.SaveThread(ctxT(t), durable.Thread{ThreadID: "t", Messages: msgs, RunID: run, UpdatedAt: at}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got := mustLoad(t, s, "t")
		run, ok := want[string(got.Messages)]
		if !ok || run != got.RunID {
			t.Fatalf("after concurrent saves: messages %s with run %q are not one saved version", got.Messages, got.RunID)
		}
	})
}
