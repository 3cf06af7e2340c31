package scripted

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// replay collects what the adapter yields on its next call.
func replay(a *Adapter) ([]agui.Event, error) {
	var out []agui.Event
	for ev, err := range a.ChatStream(context.Background(), &chat.Request{}) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// enc is the events' JSON, to compare them by value.
func enc(evs []agui.Event) string {
	var b []byte
	for i := range evs {
		b = agui.AppendJSON(b, &evs[i])
		b = append(b, '\n')
	}
	return string(b)
}

func lazyParse(data []byte) (*Scenario, error) { return parse(data, true) }

const twoTurns = `{"name":"t","turns":[
 [{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","model":"x"},{"delayMs":0},
  {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\"b\u00e9"},{"delayMs":1},{"type":"TEXT_MESSAGE_END","messageId":"m"}],
 [{"type":"RUN_FINISHED","finishReason":"stop","usage":{"promptTokens":1,"completionTokens":2,"totalTokens":3}}]]}`

// The lazy loader (goai run) replays exactly what the eager one (goai serve) does.
func TestLazyReplaysLikeEager(t *testing.T) {
	eager, err := Parse([]byte(twoTurns))
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := lazyParse([]byte(twoTurns))
	if err != nil {
		t.Fatal(err)
	}
	if eager.NumTurns() != 2 || lazy.NumTurns() != 2 {
		t.Fatalf("turns: eager %d, lazy %d", eager.NumTurns(), lazy.NumTurns())
	}
	ea, la := New(eager), New(lazy)
	for turn := range 3 {
		e, eerr := replay(ea)
		l, lerr := replay(la)
		if eerr != nil || lerr != nil {
			t.Fatalf("turn %d: %v, %v", turn, eerr, lerr)
		}
		if enc(e) != enc(l) {
			t.Errorf("turn %d:\neager %+v\nlazy  %+v", turn, e, l)
		}
		if turn == 2 && (len(e) != 1 || e[0].Message != "script exhausted") {
			t.Errorf("past the last turn: %+v", e)
		}
	}
}

func TestBadChunks(t *testing.T) {
	for _, tc := range []struct{ turns, want string }{
		{`[[{"delta":"x"}]]`, `needs a string "type"`},
		{`[[{"delayMs":-1}]]`, "delayMs must be a non-negative integer"},
		{`[[{"delayMs":"5"}]]`, "delayMs must be a non-negative integer"},
		{`[[{"type":"TEXT_MESSAGE_CONTENT"}, 7]]`, "turns[0][1]"},
	} {
		data := []byte(`{"turns":` + tc.turns + `}`)
		if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse %s: %v, want %q", tc.turns, err, tc.want)
		}
		// The lazy loader reports it when the turn is replayed.
		sc, err := lazyParse(data)
		if err != nil {
			t.Fatalf("lazy parse %s: %v", tc.turns, err)
		}
		if _, err := replay(New(sc)); err == nil || !strings.Contains(err.Error(), "scenario turn 0") {
			t.Errorf("lazy replay of %s: %v", tc.turns, err)
		}
	}
	for _, bad := range []string{`{"turns":[[{"type":"X"}]`, `{"turns":[{"type":"X"}]}`, `{"turns":[[{"type":"X",}]]}`} {
		if _, err := lazyParse([]byte(bad)); err == nil {
			t.Errorf("lazy parse accepted %s", bad)
		}
	}
}

func TestCycleAndStampYield(t *testing.T) {
	sc, err := Parse([]byte(`{"cycle":true,"stampYield":true,"turns":[
		[{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"1","timestamp":5}],
		[{"type":"TEXT_MESSAGE_CONTENT","messageId":"b","delta":"2"}]]}`))
	if err != nil {
		t.Fatal(err)
	}
	a := New(sc)
	before := time.Now().UnixMilli()
	var ids []string
	for range 5 {
		evs, err := replay(a)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%+v, %v", evs, err)
		}
		if ts := evs[0].Timestamp; ts < before || ts > time.Now().UnixMilli() {
			t.Errorf("timestamp %d is not the yield time (scripted 5)", ts)
		}
		ids = append(ids, evs[0].MessageID)
	}
	if got := strings.Join(ids, ""); got != "ababa" {
		t.Errorf("turn order %q, want ababa", got)
	}
}

// FuzzLazyParse: whatever the eager loader accepts, the lazy one accepts and
// replays the same.
func FuzzLazyParse(f *testing.F) {
	f.Add([]byte(twoTurns))
	f.Add([]byte(`{"turns":[[{"type":"RUN_STARTED"},{"delayMs":1}],[]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		eager, err := Parse(data)
		if err != nil {
			return
		}
		lazy, err := lazyParse(data)
		if err != nil {
			t.Fatalf("eager accepted, lazy refused: %v", err)
		}
		if eager.NumTurns() != lazy.NumTurns() {
			t.Fatalf("turns: eager %d, lazy %d", eager.NumTurns(), lazy.NumTurns())
		}
		ea, la := New(eager), New(lazy)
		for turn := range eager.NumTurns() {
			e, eerr := replay(ea)
			l, lerr := replay(la)
			if eerr != nil || lerr != nil || enc(e) != enc(l) {
				t.Fatalf("turn %d: eager %+v %v, lazy %+v %v", turn, e, eerr, l, lerr)
			}
		}
	})
}
