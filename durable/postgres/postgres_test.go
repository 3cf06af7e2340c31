package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/durabletest"
	"github.com/goai-sdk/goai/durable/postgres"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// testURL returns GOAI_TEST_POSTGRES or skips the test.
func testURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("GOAI_TEST_POSTGRES")
	if u == "" {
		t.Skip("GOAI_TEST_POSTGRES is not set; run scripts/setup-postgres.sh to start a server (scripts/test.sh does)")
	}
	return u
}

// newSchema creates a fresh schema, dropped at cleanup, and returns a
// connection string whose search_path selects it.
func newSchema(t testing.TB) string {
	t.Helper()
	base := testURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to GOAI_TEST_POSTGRES: %v", err)
	}
	name := "goai_test_" + fmt.Sprintf("%x", rand.Text()[:12])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Error(err)
		}
		admin.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func open(t testing.TB, connString string, opts *postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), connString, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	testURL(t)
	conns := map[durable.Log]string{}
	durabletest.Run(t, func(t *testing.T) durable.Log {
		cs := newSchema(t)
		s := open(t, cs, nil)
		conns[s] = cs
		return s
	}, &durabletest.Options{
		Reopen: func(t *testing.T, l durable.Log) durable.Log { return open(t, conns[l], nil) },
	})
}

func TestRunStoreConformance(t *testing.T) {
	testURL(t)
	durabletest.RunStore(t, func(t *testing.T) durable.Store { return open(t, newSchema(t), nil) }, nil)
}

func TestThreadStoreConformance(t *testing.T) {
	testURL(t)
	durabletest.Threads(t, func(t *testing.T) durable.ThreadStore { return open(t, newSchema(t), nil) })
}

func BenchmarkPostgres(b *testing.B) {
	testURL(b)
	durabletest.Bench(b, func(tb testing.TB) durable.Log { return open(tb, newSchema(tb), nil) })
}

// readN reads n entries from l in the background and reports them.
func readN(ctx context.Context, l durable.Log, run string, n int) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		var got []string
		for e, err := range l.Read(ctx, run, durable.FromStart) {
			if err != nil {
				break
			}
			got = append(got, string(e.Data))
			if len(got) == n {
				break
			}
		}
		out <- got
	}()
	return out
}

// A reader on one Store is woken by appends through another Store (another
// host): the wake-up travels by NOTIFY.
func TestNotifyWakesOtherInstance(t *testing.T) {
	cs := newSchema(t)
	a := open(t, cs, nil)
	b := open(t, cs, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Append(ctx, "r", [][]byte{[]byte("1")}); err != nil {
		t.Fatal(err)
	}
	got := readN(ctx, a, "r", 3)
	time.Sleep(100 * time.Millisecond) // let the reader park
	for _, d := range []string{"2", "3"} {
		if _, err := b.Append(ctx, "r", [][]byte{[]byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case g := <-got:
		if fmt.Sprint(g) != "[1 2 3]" {
			t.Fatalf("got %q", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader on another instance was not woken")
	}
	// Close through b ends a's parked reader.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range a.Read(ctx, "r", durable.FromStart) {
		}
	}()
	time.Sleep(100 * time.Millisecond)
	if err := b.Close(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close on another instance did not end the read")
	}
}

// A store forgets its cache of a log another store appended to: a reader
// resuming at the tail it had cached must find the other store's entries,
// not park on a tail that is no longer one (the notification that told of
// them came before the read began).
func TestResumeAfterAnotherStoresAppend(t *testing.T) {
	cs := newSchema(t)
	a := open(t, cs, nil)
	b := open(t, cs, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := a.Append(ctx, "r", [][]byte{[]byte("1"), []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	woken, release := postgres.NextWake(a, "r")
	defer release()
	if _, err := b.Append(ctx, "r", [][]byte{[]byte("3")}); err != nil {
		t.Fatal(err)
	}
	<-woken // a heard of b's append
	for e, err := range a.Read(ctx, "r", offs[1]) {
		if err != nil {
			t.Fatalf("resuming after a's tail: %v", err)
		}
		if string(e.Data) != "3" {
			t.Fatalf("resumed at %q, want b's entry", e.Data)
		}
		return
	}
	t.Fatal("the read ended without b's entry")
}

// When the listening connection dies, the Store reconnects, wakes every
// reader (notifications may have been missed) and keeps delivering.
func TestListenerReconnects(t *testing.T) {
	cs := newSchema(t)
	a := open(t, cs, &postgres.Options{Channel: "goai_reconnect_test"})
	b := open(t, cs, &postgres.Options{Channel: "goai_reconnect_test"})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := b.Append(ctx, "r", [][]byte{[]byte("1")}); err != nil {
		t.Fatal(err)
	}
	got := readN(ctx, a, "r", 2)
	time.Sleep(100 * time.Millisecond)
	admin, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// Kill every listener on the channel (a's and b's), then append while
	// they reconnect.
	var killed int
	err = admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %goai_reconnect_test%' AND pid <> pg_backend_pid()`).Scan(&killed)
	if err != nil || killed < 1 {
		t.Fatalf("terminated %d listeners: %v", killed, err)
	}
	if _, err := b.Append(ctx, "r", [][]byte{[]byte("2")}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if fmt.Sprint(g) != "[1 2]" {
			t.Fatalf("got %q", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader not woken after the listener reconnected")
	}
}

func TestMissingEnvSkips(t *testing.T) {
	if os.Getenv("GOAI_TEST_POSTGRES") != "" {
		t.Skip("GOAI_TEST_POSTGRES is set")
	}
}

func TestRequestStoreConformance(t *testing.T) {
	testURL(t)
	durabletest.Requests(t, func(t *testing.T) durable.Store { return open(t, newSchema(t), nil) })
}

func TestReadAcrossInstances(t *testing.T) {
	cs := newSchema(t)
	durabletest.ReadAcrossInstances(t, open(t, cs, nil), open(t, cs, nil))
}

// CommitStats counts every append once, in a commit of one or more.
func TestCommitStats(t *testing.T) {
	s := open(t, newSchema(t), nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Append(ctx, "alone", [][]byte{fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.CommitStats(), (durable.CommitStats{Commits: 3, Writes: 3}); got != want {
		t.Fatalf("three appends one after another: %+v, want %+v", got, want)
	}
	const producers = 40
	errs := make(chan error, producers)
	for i := range producers {
		go func() {
			_, err := s.Append(ctx, fmt.Sprintf("run-%d", i), [][]byte{[]byte(`{}`)})
			errs <- err
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := s.CommitStats()
	if got.Writes != 3+producers || got.Commits < 4 || got.Commits > 3+producers {
		t.Fatalf("after %d concurrent appends: %+v", producers, got)
	}
}

// A tailer of a log this store appends to reads each append from the
// cache of recent entries, woken by the append: the append's own
// notification, arriving after, does not wake it again to query the
// database (nor, arriving first, have it read there what the cache is
// about to hold).
func TestOwnNotificationsWakeNoTailer(t *testing.T) {
	s := open(t, newSchema(t), nil)
	queries := postgres.CountReadQueries(s)
	const n = 200
	ctx := t.Context()
	if _, err := s.Append(ctx, "own", [][]byte{[]byte(`{"i":1}`)}); err != nil {
		t.Fatal(err)
	}
	read := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		got := 0
		for _, err := range s.Read(ctx, "own", durable.FromStart) {
			if err != nil {
				done <- err
				return
			}
			got++
			read <- got
		}
		done <- nil
	}()
	for i := 2; i <= n; i++ {
		for got := <-read; got < i-1; got = <-read {
		}
		if _, err := s.Append(ctx, "own", [][]byte{fmt.Appendf(nil, `{"i":%d}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	for got := <-read; got < n; got = <-read {
	}
	if err := s.Close(ctx, "own"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q := queries.Load(); q > n/10 {
		t.Fatalf("the tailer queried the database %d times for %d appends of this store", q, n)
	}
}
