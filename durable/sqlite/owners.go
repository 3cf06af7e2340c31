package sqlite

import (
	"database/sql"
	"fmt"
	"hash/maphash"
	"sync"
)

// The owners' cache. Every chat request asks who owns its thread, and on
// a busy server the query is not cheap: SQLite drops a reader's page cache
// whenever the writer has committed since its last read, so each answer
// re-reads the indexes' pages from the WAL and the file (9 to 13 us a
// check beside a committing writer, against 4 us on an idle store:
// BenchmarkThreadOwnerBusy, BenchmarkThreadOwner). When the
// store is the file's only writer (Options.OneProcess), every change to an
// owner passes through its writer, and the answers can come from memory:
//
//   - threads is a filter of every thread that has a saved row or a run. A
//     thread it has never seen has no owner, with no query (the first
//     request of every new conversation). It can answer "maybe" for a
//     thread it never saw (then the query runs), never "no" for one it saw.
//   - owners holds the answers found lately, for the next requests of the
//     same conversations.
//
// The writer adds a thread to the filter before the statement that gives
// it a row or a run, so that once that commits the filter already holds
// it; and forgets the thread's answer after its transaction ends, so that
// a reader's answer is never older than the last write it could see. A
// reader keeps what it queried only if no such forgetting of its thread
// happened meanwhile (stripe generations), since its query may have read
// the file before the write.
type ownerCache struct {
	seed maphash.Seed

	mu       sync.Mutex
	threads  threadFilter
	complete bool // threads holds every thread of the database (load is done)
	owners   map[string]string
	gens     [ownerStripes]uint64
	touched  []string // threads the writer's transaction in progress changes
}

const (
	// ownerStripes is the number of generations readers check: a write
	// to one thread does not stop the answers for others being kept.
	ownerStripes = 64
	// maxOwners bounds the answers kept (about 100 bytes each).
	maxOwners = 16384
)

func newOwnerCache() *ownerCache {
	return &ownerCache{seed: maphash.MakeSeed(), owners: map[string]string{}}
}

// load fills the filter with every thread the database holds, through
// q (a reader), until stop is closed; then the filter's "no" is an answer.
// It runs beside the writer, whose additions go to the same filter from
// the start: a thread committed before the scan's snapshot is in the scan,
// one committed after was added before its commit. (It reads about 2.5
// million threads a second, BenchmarkThreadOwnersLoad; Open does not wait.)
func (c *ownerCache) load(q *sql.DB, stop <-chan struct{}) error {
	batch := make([]uint64, 0, 1024)
	flush := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, h := range batch {
			c.threads.add(h)
		}
		batch = batch[:0]
	}
	for _, query := range []string{
		`SELECT thread_id FROM goai_threads`,
		`SELECT DISTINCT thread_id FROM goai_runs`,
	} {
		rows, err := q.Query(query)
		if err != nil {
			return fmt.Errorf("durable/sqlite: the threads: %w", err)
		}
		var id string
		for rows.Next() {
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("durable/sqlite: the threads: %w", err)
			}
			if batch = append(batch, c.hash(id)); len(batch) == cap(batch) {
				flush()
				select {
				case <-stop:
					rows.Close()
					return nil
				default:
				}
			}
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("durable/sqlite: the threads: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("durable/sqlite: the threads: %w", err)
		}
	}
	flush()
	c.mu.Lock()
	c.complete = true
	c.mu.Unlock()
	return nil
}

// hash is the hash the filter and the stripes use for thread.
func (c *ownerCache) hash(thread string) uint64 { return maphash.String(c.seed, thread) }

// lookup answers from memory when it can (known). Otherwise gen is what a
// query's answer is kept against (remember).
func (c *ownerCache) lookup(thread string) (owner string, found, known bool, gen uint64) {
	h := c.hash(thread)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.complete && !c.threads.mayHave(h) {
		return "", false, true, 0
	}
	if o, ok := c.owners[thread]; ok {
		return o, true, true, 0
	}
	return "", false, false, c.gens[h%ownerStripes]
}

// remember keeps a queried owner unless the writer changed the thread
// since gen was read.
func (c *ownerCache) remember(thread, owner string, gen uint64) {
	h := c.hash(thread)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens[h%ownerStripes] != gen {
		return
	}
	if len(c.owners) >= maxOwners {
		for k := range c.owners { // an arbitrary one: map iteration starts at random
			delete(c.owners, k)
			break
		}
	}
	c.owners[thread] = owner
}

// adding is called by the writer before a statement that may give thread
// a row, a run or another owner.
func (c *ownerCache) adding(thread string) {
	h := c.hash(thread)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.threads.add(h)
	c.touched = append(c.touched, thread)
}

// ended is called by the writer once its transaction has ended, committed
// or not: the threads it touched are asked again.
func (c *ownerCache) ended() {
	if len(c.touched) == 0 {
		return // most transactions (appends) touch no thread; only the writer changes touched
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, thread := range c.touched {
		delete(c.owners, thread)
		c.gens[c.hash(thread)%ownerStripes]++
	}
	clear(c.touched)
	c.touched = c.touched[:0]
}

// forgetAll drops every answer kept (a prune may have removed the runs an
// answer came from). The filter stays: a thread it holds is only asked.
func (c *ownerCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.owners)
	for i := range c.gens {
		c.gens[i]++
	}
}

// threadFilter is a Bloom filter that grows: when its newest layer holds
// as many threads as it was sized for, a layer twice as large is added.
// Each layer gives about 10 bits a thread and 7 probes (under 1 % false
// "maybe"s per layer), and no layer is ever rebuilt, so growing costs no
// scan of the database.
type threadFilter struct {
	layers []filterLayer
}

type filterLayer struct {
	bits []uint64
	n    int // threads added
	cap  int // threads the layer is sized for
}

const (
	firstFilterCap = 1 << 16
	filterProbes   = 7
	filterBitsPer  = 10
)

func (f *threadFilter) mayHave(h uint64) bool {
	for i := range f.layers {
		if f.layers[i].has(h) {
			return true
		}
	}
	return false
}

func (f *threadFilter) add(h uint64) {
	if f.mayHave(h) {
		return
	}
	if len(f.layers) == 0 || f.layers[len(f.layers)-1].n >= f.layers[len(f.layers)-1].cap {
		c := firstFilterCap
		if len(f.layers) > 0 {
			c = 2 * f.layers[len(f.layers)-1].cap
		}
		f.layers = append(f.layers, filterLayer{bits: make([]uint64, (c*filterBitsPer+63)/64), cap: c})
	}
	l := &f.layers[len(f.layers)-1]
	l.n++
	m := uint64(len(l.bits) * 64)
	h1, h2 := h, h>>32|1 // double hashing: probe i is h1 + i*h2
	for i := uint64(0); i < filterProbes; i++ {
		b := (h1 + i*h2) % m
		l.bits[b/64] |= 1 << (b % 64)
	}
}

func (l *filterLayer) has(h uint64) bool {
	m := uint64(len(l.bits) * 64)
	h1, h2 := h, h>>32|1
	for i := uint64(0); i < filterProbes; i++ {
		b := (h1 + i*h2) % m
		if l.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}
