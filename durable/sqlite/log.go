package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/internal/tail"
)

func offsets(runID string, first, n int64) []string {
	return durable.FormatOffsets(scheme, runID, first, n)
}

// Append implements durable.Log.
func (s *Store) Append(ctx context.Context, runID string, batch [][]byte) ([]string, error) {
	return s.AppendWith(ctx, runID, batch, durable.AppendOptions{})
}

// AppendWith implements durable.Log. The epoch check, the idempotency check
// and the insert share one transaction.
func (s *Store) AppendWith(ctx context.Context, runID string, batch [][]byte, opts durable.AppendOptions) ([]string, error) {
	if err := durable.CheckRunID(runID); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return []string{}, ctx.Err()
	}
	o := &op{wake: runID, app: appendJob{runID: runID, batch: batch, opts: opts}, done: make(chan error, 1)}
	if err := s.execOp(ctx, o); err != nil {
		return nil, err
	}
	return offsets(runID, o.app.first, o.app.n), nil
}

// AppendQueued implements durable.QueuedAppender.
func (s *Store) AppendQueued(runID string, opts durable.AppendOptions, take func() [][]byte, done func(error) bool) {
	err := durable.CheckRunID(runID)
	if err == nil {
		o, _ := s.appendOps.Get().(*op)
		if o == nil {
			o = new(op)
		}
		*o = op{wake: runID, app: appendJob{runID: runID, opts: opts, take: take, then: done}}
		if err = s.enqueue(o); err != nil {
			*o = op{}
			s.appendOps.Put(o)
		}
	}
	if err != nil {
		done(err)
	}
}

// appendJob runs the append of an op.
//
// A queued append takes its batch now, as late as it can, and keeps it:
// when the group fails and each op runs again alone, the same batch is
// appended.
func (s *Store) appendJob(tx *writeTx, a *appendJob) (err error) {
	if a.take != nil && a.batch == nil {
		a.batch = a.take()
	}
	if len(a.batch) == 0 {
		a.first, a.n, a.stored, a.entry = 0, 0, false, nil
		return nil
	}
	a.first, a.n, a.stored, a.entry, err = s.appendTx(tx, a.runID, a.batch, a.take != nil, a.opts, s.opts.Now())
	if a.stored {
		s.carried += int(a.n)
	}
	return err
}

// appendTx appends batch; stored is false when it was a repeat (an
// idempotent append already stored). owned says the batch's entries were
// handed over (a queued append's): the writer may keep them as they are.
//
// entry, for a batch of one that was not handed over stored in the
// journal, is the writer's own copy of it, which the cache of recent
// entries may share.
func (s *Store) appendTx(tx *writeTx, runID string, batch [][]byte, owned bool, opts durable.AppendOptions, now time.Time) (first, n int64, stored bool, entry []byte, err error) {
	p := opts.Producer
	// The log's state and the run's epoch, and the tail, come from the
	// writer's memory once read, so the append writes the journal's last
	// page and reads nothing. Such an append runs no statement at all:
	// its rows are queued with the others of the transaction. Any other
	// runs statements, which must see the rows queued before it.
	epoch, open := s.jt.openEpoch(runID)
	tail, tailKnown := s.jt.tail(runID)
	if !open || !tailKnown || p.ID != "" {
		if err := tx.flushQueued(); err != nil {
			return 0, 0, false, nil, err
		}
	}
	if p.ID != "" {
		first, n, err := s.producerBatch(tx, runID, p)
		switch {
		case err == nil:
			if n != int64(len(batch)) {
				return 0, 0, false, nil, fmt.Errorf("%w: run %q producer %q seq %d", durable.ErrProducerConflict, runID, p.ID, p.Seq)
			}
			return first, n, false, nil, nil
		case !errors.Is(err, sql.ErrNoRows):
			return 0, 0, false, nil, fmt.Errorf("durable/sqlite: append: %w", err)
		}
	}
	var closed sql.NullInt64
	created, known := false, open
	if !open {
		// A run this writer started has its epoch known and, most
		// likely, no log yet: the log is created if absent, and only a
		// log that was there is asked about. (If the fence below then
		// fails, the op's failure rolls the creation back.)
		if epoch, known = s.jt.startedEpoch(runID); known {
			if created, err = s.createLog(tx, runID, now); err != nil {
				return 0, 0, false, nil, fmt.Errorf("durable/sqlite: append: %w", err)
			}
		}
		if !known || !created {
			if closed, epoch, err = s.appendState(tx, runID); err != nil {
				return 0, 0, false, nil, fmt.Errorf("durable/sqlite: append: %w", err)
			}
		}
	}
	if opts.Epoch > 0 && epoch != opts.Epoch {
		return 0, 0, false, nil, &durable.ClaimLostError{RunID: runID, Held: opts.Epoch, Observed: epoch}
	}
	if !open {
		switch {
		case created:
		case closed.Int64 != 0:
			return 0, 0, false, nil, fmt.Errorf("%w: run %q", durable.ErrLogClosed, runID)
		case !closed.Valid:
			if created, err = s.createLog(tx, runID, now); err != nil {
				return 0, 0, false, nil, fmt.Errorf("durable/sqlite: append: %w", err)
			}
		}
		s.jt.setOpen(runID, epoch)
	}
	// A log without its goai_logs row has no entries (every write of
	// entries creates the row, and a prune deletes it last): a log created
	// here starts at 0. Asking would scan the journal, which has no index
	// by run: about 100 us for the first append of every run.
	var last int64
	switch {
	case created:
	case tailKnown:
		last = tail
	default:
		if last, err = s.appendTail(tx, runID); err != nil {
			return 0, 0, false, nil, fmt.Errorf("durable/sqlite: append: %w", err)
		}
	}
	n = int64(len(batch))
	// A small batch goes to the journal as one chunk; a large one goes
	// straight to goai_chunks, where its run's page is written once for
	// many entries anyway, in chunks of maxChunk entries at most. Either
	// way the rows are queued, and inserted with the transaction's others.
	rows := 0
	if len(batch) < putMany {
		rows = 1
		data := encodeChunk(batch)
		if len(batch) == 1 && !owned {
			// data is the caller's entry: the writer keeps its copy of
			// the row until the journal is compacted, and the caller may
			// reuse its buffer once the append returns.
			data = append(make([]byte, 0, len(data)), data...)
			entry = data
		}
		tx.queueJournal(runID, last+1, last+n, data)
		s.jt.inserted(journalRow{run: runID, first: last + 1, last: last + n, data: data})
	} else {
		for at := 0; at < len(batch); at += maxChunk {
			c := batch[at:min(at+maxChunk, len(batch))]
			tx.queueChunk(runID, last+1+int64(at), last+int64(at+len(c)), c)
		}
	}
	s.jt.set(runID, last+n, rows)
	if p.ID != "" {
		if err := tx.flushQueued(); err != nil {
			return 0, 0, false, nil, err
		}
		if _, err := tx.Stmt(s.st.producerPut).Exec(runID, p.ID, p.Seq, last+1, n); err != nil {
			return 0, 0, false, nil, fmt.Errorf("durable/sqlite: append: %w", err)
		}
	}
	return last + 1, n, true, entry, nil
}

// producerBatch returns the seqs stored by producer p's append, which
// sql.ErrNoRows says it has not made. (The lookups are functions of their
// own so that their scanned variables, whose addresses escape, are
// allocated only when they run: an append asks neither once its run's
// state is known.)
func (s *Store) producerBatch(tx *writeTx, runID string, p durable.Producer) (first, n int64, err error) {
	err = tx.Stmt(s.st.producerGet).QueryRow(runID, p.ID, p.Seq).Scan(&first, &n)
	return first, n, err
}

// appendState reads whether runID's log is closed (not valid: it has no
// log yet) and its run's driver epoch.
func (s *Store) appendState(tx *writeTx, runID string) (closed sql.NullInt64, epoch int64, err error) {
	s.stateQueries.Add(1)
	var e sql.NullInt64
	err = tx.Stmt(s.st.appendState).QueryRow(runID).Scan(&closed, &e)
	return closed, e.Int64, err
}

// createLog creates runID's log unless it has one, and reports whether it
// did.
func (s *Store) createLog(tx *writeTx, runID string, now time.Time) (bool, error) {
	res, err := tx.Stmt(s.st.logCreate).Exec(runID, now.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Close implements durable.Log.
func (s *Store) Close(ctx context.Context, runID string) error {
	if err := durable.CheckRunID(runID); err != nil {
		return err
	}
	now := s.opts.Now().UnixMilli()
	var last int64
	return s.execThen(ctx, oneRun(runID), runID, func(tx *writeTx) error {
		var err error
		if last, err = s.appendTail(tx, runID); err != nil {
			return fmt.Errorf("durable/sqlite: close: %w", err)
		}
		_, err = tx.Stmt(s.st.logClose).Exec(runID, last, now)
		if err != nil {
			return fmt.Errorf("durable/sqlite: close: %w", err)
		}
		s.jt.forget(runID) // no more appends
		return nil
	}, func() { s.recent.Closed(runID, last) })
}

// Snapshot implements durable.Log.
func (s *Store) Snapshot(ctx context.Context, runID string) ([]durable.Entry, error) {
	if s.isClosed() {
		return nil, durable.ErrStoreClosed
	}
	out := []durable.Entry{}
	mint := durable.NewOffsetMinter(scheme, runID)
	err := s.page(ctx, runID, 0, -1, 0, func(seq int64, data []byte) {
		out = append(out, durable.Entry{Offset: mint.Offset(seq), Data: data})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// page calls f for the entries after seq after, up to seq upTo (-1: no
// bound), at most limit of them (0: no limit).
func (s *Store) page(ctx context.Context, runID string, after, upTo int64, limit int, f func(seq int64, data []byte)) error {
	hi, hiLast := seqRange(after, upTo, limit)
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.st.readPage.QueryContext(ctx, runID, after, hi, hiLast)
	if err != nil {
		return fmt.Errorf("durable/sqlite: read: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() && (limit < 0 || n < limit) {
		var first, last int64
		var data []byte
		if err := rows.Scan(&first, &last, &data); err != nil {
			return fmt.Errorf("durable/sqlite: read: %w", err)
		}
		err := decodeChunk(first, last, data, after, hi, func(seq int64, b []byte) bool {
			if b == nil {
				b = []byte{}
			}
			f(seq, b)
			n++
			return limit < 0 || n < limit
		})
		if err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("durable/sqlite: read: %w", err)
	}
	return nil
}

// logState returns the tail of runID's log and whether it is closed; ok is
// false when the run has no log.
func (s *Store) logState(ctx context.Context, runID string) (last int64, closed, ok bool, err error) {
	var closedAt sql.NullInt64
	err = s.st.readState.QueryRowContext(ctx, runID).Scan(&last, &closedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, fmt.Errorf("durable/sqlite: read: %w", err)
	}
	return last, closedAt.Valid, true, nil
}

// query reads the state of runID's log with up to limit entries after seq
// after, in one statement (one snapshot); limit 0 reads the state only.
func (s *Store) query(ctx context.Context, runID string, after int64, limit int) (*tail.State, error) {
	if limit == 0 {
		last, closed, ok, err := s.logState(ctx, runID)
		if err != nil {
			return nil, err
		}
		return &tail.State{Exists: ok, Last: last, Closed: closed}, nil
	}
	hi, hiLast := seqRange(after, -1, limit)
	rows, err := s.st.readLog.QueryContext(ctx, runID, after, hi, hiLast)
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: read: %w", err)
	}
	defer rows.Close()
	st := &tail.State{}
	mint := durable.NewOffsetMinter(scheme, runID)
	for rows.Next() {
		var first, last sql.NullInt64
		var data []byte
		if err := rows.Scan(&st.Last, &st.Closed, &first, &last, &data); err != nil {
			return nil, fmt.Errorf("durable/sqlite: read: %w", err)
		}
		st.Exists = true
		if !first.Valid || len(st.Entries) >= limit {
			continue
		}
		err := decodeChunk(first.Int64, last.Int64, data, after, hi, func(seq int64, b []byte) bool {
			if b == nil {
				b = []byte{}
			}
			st.Entries = append(st.Entries, durable.Entry{Offset: mint.Offset(seq), Data: b})
			return len(st.Entries) < limit
		})
		if err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable/sqlite: read: %w", err)
	}
	return st, nil
}

// Read implements durable.Log.
func (s *Store) Read(ctx context.Context, runID, after string) iter.Seq2[durable.Entry, error] {
	return s.tail.Read(ctx, runID, after)
}

// ReadBatches implements durable.BatchReader.
func (s *Store) ReadBatches(ctx context.Context, runID, after string) iter.Seq2[[]durable.Entry, error] {
	return s.tail.ReadBatches(ctx, runID, after)
}

// Upsert implements durable.Upserter.
func (s *Store) Upsert(ctx context.Context, runID string, entries []durable.Entry) ([]string, error) {
	if err := durable.CheckRunID(runID); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return []string{}, nil
	}
	now := s.opts.Now().UnixMilli()
	err := s.execThen(ctx, oneRun(runID), runID, func(tx *writeTx) error {
		// Entries are edited in place in goai_chunks: first move the
		// run's journal rows there.
		s.jt.forget(runID)
		s.jt.journalChanged()
		if err := compactRun(tx, runID); err != nil {
			return fmt.Errorf("durable/sqlite: upsert: %w", err)
		}
		var last int64
		var closed sql.NullInt64
		err := tx.QueryRow(`SELECT (SELECT coalesce(max(last_seq), 0) FROM goai_chunks WHERE log = l.id), closed_at FROM goai_logs l WHERE run_id = ?1`, runID).Scan(&last, &closed)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("durable/sqlite: upsert: %w", err)
		case closed.Valid:
			return fmt.Errorf("%w: run %q", durable.ErrLogClosed, runID)
		}
		seqs, err := durable.PlanUpsert(scheme, runID, last, entries)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO goai_logs (run_id, last_seq, created_at, id) VALUES (?1, 0, ?2, `+newLogID+`) ON CONFLICT (run_id) DO NOTHING`, runID, now); err != nil {
			return fmt.Errorf("durable/sqlite: upsert: %w", err)
		}
		for i, e := range entries {
			if seqs[i] <= last {
				if err := splitChunkAt(tx, runID, seqs[i]); err != nil {
					return fmt.Errorf("durable/sqlite: upsert: %w", err)
				}
			}
			data := e.Data
			if data == nil {
				data = []byte{}
			}
			if _, err := tx.Exec(`INSERT INTO goai_chunks (log, last_seq, first_seq, data) VALUES (`+logOf+`, ?2, ?2, ?3)
				ON CONFLICT (log, last_seq) DO UPDATE SET data = excluded.data`, runID, seqs[i], data); err != nil {
				return fmt.Errorf("durable/sqlite: upsert: %w", err)
			}
		}
		return nil
	}, func() { s.recent.Forget(runID) })
	if err != nil {
		return nil, err
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Offset
	}
	return out, nil
}

// splitChunkAt replaces the chunk of goai_chunks holding runID's entry seq,
// if it holds several, by chunks of one entry each, so that the entry can
// be edited in place.
func splitChunkAt(tx *writeTx, runID string, seq int64) error {
	var first, last int64
	var data []byte
	err := tx.QueryRow(`SELECT first_seq, last_seq, data FROM goai_chunks WHERE log = `+logOf+` AND last_seq >= ?2 ORDER BY last_seq LIMIT 1`, runID, seq).
		Scan(&first, &last, &data)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (first > seq || first == last) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM goai_chunks WHERE log = `+logOf+` AND last_seq = ?2`, runID, last); err != nil {
		return err
	}
	var ins error
	err = decodeChunk(first, last, data, first-1, last, func(seq int64, b []byte) bool {
		_, ins = tx.Exec(`INSERT INTO goai_chunks (log, last_seq, first_seq, data) VALUES (`+logOf+`, ?2, ?2, ?3)`, runID, seq, b)
		return ins == nil
	})
	return errors.Join(err, ins)
}

// Prune implements durable.Pruner.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	var n int
	err := s.execThen(ctx, anyRun, "", func(tx *writeTx) error {
		s.jt.journalChanged()
		c := cutoff.UnixMilli()
		for _, q := range []string{
			`DELETE FROM goai_chunks WHERE log IN (SELECT id FROM goai_logs WHERE closed_at <= ?)`,
			`DELETE FROM goai_chunk_journal WHERE run_id IN (SELECT run_id FROM goai_logs WHERE closed_at <= ?)`,
			`DELETE FROM goai_producers WHERE run_id IN (SELECT run_id FROM goai_logs WHERE closed_at <= ?)`,
		} {
			if _, err := tx.Exec(q, c); err != nil {
				return fmt.Errorf("durable/sqlite: prune: %w", err)
			}
		}
		// Finished runs' records go with their logs.
		for _, q := range []string{
			`DELETE FROM goai_leases WHERE run_id IN (SELECT run_id FROM goai_runs WHERE finished_at <= ? AND status IN ('completed', 'failed', 'aborted'))`,
			`DELETE FROM goai_run_requests WHERE run_id IN (SELECT run_id FROM goai_runs WHERE finished_at <= ? AND status IN ('completed', 'failed', 'aborted'))`,
			`DELETE FROM goai_runs WHERE finished_at <= ? AND status IN ('completed', 'failed', 'aborted')`,
		} {
			if _, err := tx.Exec(q, c); err != nil {
				return fmt.Errorf("durable/sqlite: prune: %w", err)
			}
		}
		res, err := tx.Exec(`DELETE FROM goai_logs WHERE closed_at <= ?`, c)
		if err != nil {
			return fmt.Errorf("durable/sqlite: prune: %w", err)
		}
		m, err := res.RowsAffected()
		n = int(m)
		return err
	}, func() {
		s.recent.Clear()
		if s.owners != nil {
			s.owners.forgetAll() // a thread's first run may be gone
		}
	})
	return n, err
}
