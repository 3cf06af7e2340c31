package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/goai-sdk/goai/durable"
	"github.com/jackc/pgx/v5"
)

// Group commit. Appends are queued to one committer goroutine; whatever is
// queued when it becomes free is run as one transaction (one WAL flush) with
// the goai_append calls pipelined in one round trip, ordered by run id so
// that concurrent groups of different Stores lock rows in the same order. A
// lone append runs as a single statement. If a group fails as a whole, its
// appends are retried one by one, so one bad request cannot fail the others.

const appendSQL = `SELECT first_seq, n, code, observed FROM goai_append($1, $2, $3, $4, $5, $6, $7)`

type appendReq struct {
	runID string
	data  [][]byte
	opts  durable.AppendOptions
	now   int64

	res  appendRes
	err  error
	done chan struct{}
}

type appendRes struct {
	first, n, observed *int64
	code               string
}

func (r *appendReq) args(channel string) []any {
	return []any{r.runID, r.data, r.opts.Epoch, r.opts.Producer.ID, r.opts.Producer.Seq, r.now, channel}
}

// submit queues r and waits for its outcome. Once queued, an append is not
// abandoned because ctx ends: the caller learns whether it was stored.
func (s *Store) submit(ctx context.Context, r *appendReq) (appendRes, error) {
	r.done = make(chan struct{})
	select {
	case s.appends <- r:
	case <-ctx.Done():
		return appendRes{}, ctx.Err()
	case <-s.ctx.Done():
		return appendRes{}, durable.ErrStoreClosed
	}
	<-r.done
	return r.res, r.err
}

func (s *Store) committer() {
	defer close(s.committerDone)
	group := make([]*appendReq, 0, s.opts.MaxGroup)
	for {
		group = group[:0]
		select {
		case r := <-s.appends:
			group = append(group, r)
		case <-s.ctx.Done():
			return
		}
	fill:
		for len(group) < s.opts.MaxGroup {
			select {
			case r := <-s.appends:
				group = append(group, r)
			default:
				break fill
			}
		}
		s.commitGroup(group)
	}
}

func (s *Store) commitOne(r *appendReq) {
	// The committer's context is detached from callers: a queued append
	// completes even if its caller has gone.
	ctx := context.WithoutCancel(s.ctx)
	s.own.expect(r.runID)
	err := s.pool.QueryRow(ctx, appendSQL, r.args(s.opts.Channel)...).Scan(&r.res.first, &r.res.n, &r.res.code, &r.res.observed)
	r.err = wrap("append", err)
	if err == nil {
		s.counted(1)
	}
	if err != nil || r.res.code != "ok" {
		s.own.withdraw(r.runID, s.appendedElsewhere)
	}
	close(r.done)
}

func (s *Store) commitGroup(group []*appendReq) {
	if len(group) == 1 {
		s.commitOne(group[0])
		return
	}
	slices.SortStableFunc(group, func(a, b *appendReq) int { return cmp.Compare(a.runID, b.runID) })
	ctx := context.WithoutCancel(s.ctx)
	// A transaction sends one notification per run (Postgres drops
	// identical repeats): expect one per run, the group being sorted by run.
	for i, r := range group {
		if i == 0 || group[i-1].runID != r.runID {
			s.own.expect(r.runID)
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, r := range group {
			b.Queue(appendSQL, r.args(s.opts.Channel)...)
		}
		br := tx.SendBatch(ctx, b)
		for _, r := range group {
			if err := br.QueryRow().Scan(&r.res.first, &r.res.n, &r.res.code, &r.res.observed); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	})
	// A run none of whose appends stored anything sent no notification.
	for i := 0; i < len(group); {
		j, stored := i, false
		for ; j < len(group) && group[j].runID == group[i].runID; j++ {
			stored = stored || group[j].res.code == "ok"
		}
		if err != nil || !stored {
			s.own.withdraw(group[i].runID, s.appendedElsewhere)
		}
		i = j
	}
	if err != nil {
		s.opts.Logger.Warn("durable/postgres: group commit failed; retrying its appends one by one",
			"appends", len(group), "err", fmt.Sprint(err))
		for _, r := range group {
			r.res = appendRes{}
			s.commitOne(r)
		}
		return
	}
	s.counted(len(group))
	for _, r := range group {
		close(r.done)
	}
}

// counted records a commit of n appends.
func (s *Store) counted(n int) {
	s.commits.Add(1)
	s.writes.Add(int64(n))
}

// CommitStats implements durable.CommitCounter: the committer's
// transactions (a lone append's statement among them). Writes other than
// appends run on their own and are not counted.
func (s *Store) CommitStats() durable.CommitStats {
	return durable.CommitStats{Commits: s.commits.Load(), Writes: s.writes.Load()}
}
