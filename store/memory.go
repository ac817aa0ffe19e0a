package store

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/loomkit/loom/llm"
)

// Memory is a Store that keeps everything in memory, for tests and for runs
// that need no durability. It is safe for concurrent use. Its clock is
// time.Now, so claims expire under testing/synctest's fake clock too.
type Memory struct {
	mu     sync.Mutex
	closed bool
	runs   map[string]*memRun
	claims map[string]memClaim
	convs  map[string][]memMessage
}

type memRun struct {
	info RunInfo
	// records in chunks of chunkSize, so an append never copies the journal
	chunks [][]Record
}

const chunkSize = 256

func (r *memRun) add(recs []Record) {
	for _, rec := range recs {
		if n := len(r.chunks); n == 0 || len(r.chunks[n-1]) == chunkSize {
			r.chunks = append(r.chunks, make([]Record, 0, chunkSize))
		}
		last := &r.chunks[len(r.chunks)-1]
		*last = append(*last, rec)
	}
}

// record returns the record with sequence seq (1-based).
func (r *memRun) record(seq int64) *Record {
	i := seq - 1
	return &r.chunks[i/chunkSize][i%chunkSize]
}

type memClaim struct {
	owner   string
	expires time.Time
}

type memMessage struct {
	runID string
	data  []byte
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{
		runs:   make(map[string]*memRun),
		claims: make(map[string]memClaim),
		convs:  make(map[string][]memMessage),
	}
}

var _ Store = (*Memory)(nil)

// lock takes the store's lock unless the context is done or the store is
// closed; on success the caller must unlock.
func (m *Memory) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Append implements Store.
func (m *Memory) Append(ctx context.Context, runID string, expectedSeq int64, recs ...Record) (int64, error) {
	prepared, err := PrepareAppend(runID, expectedSeq, recs, time.Now())
	if err != nil {
		return 0, err
	}
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	run := m.runs[runID]
	var last int64
	if run != nil {
		last = run.info.LastSeq
	} else if expectedSeq > 0 {
		return 0, NotFound(runID)
	}
	if last != expectedSeq {
		return 0, &ConflictError{RunID: runID, Expected: expectedSeq, Actual: last}
	}
	info := RunInfo{}
	if run != nil {
		info = run.info
	}
	for _, r := range prepared {
		if err := info.Apply(runID, r); err != nil {
			return 0, err
		}
	}
	if run == nil {
		run = &memRun{}
		m.runs[runID] = run
	}
	run.info = info
	run.add(prepared)
	return info.LastSeq, nil
}

// Load implements Store.
func (m *Memory) Load(ctx context.Context, runID string, afterSeq int64) ([]Record, error) {
	if err := CheckRunID(runID); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	run := m.runs[runID]
	if run == nil {
		return nil, NotFound(runID)
	}
	afterSeq = max(afterSeq, 0)
	out := make([]Record, 0, max(0, run.info.LastSeq-afterSeq))
	for seq := afterSeq + 1; seq <= run.info.LastSeq; seq++ {
		r := *run.record(seq)
		if err := CheckStored(runID, r); err != nil {
			return nil, err
		}
		if r.Data != nil {
			r.Data = bytes.Clone(r.Data)
		}
		out = append(out, r)
	}
	return out, nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, runID string) (RunInfo, error) {
	if err := CheckRunID(runID); err != nil {
		return RunInfo{}, err
	}
	if err := m.lock(ctx); err != nil {
		return RunInfo{}, err
	}
	defer m.mu.Unlock()
	run := m.runs[runID]
	if run == nil {
		return RunInfo{}, NotFound(runID)
	}
	return m.infoLocked(run, time.Now()), nil
}

func (m *Memory) infoLocked(run *memRun, now time.Time) RunInfo {
	info := run.info
	if c, ok := m.claims[info.ID]; ok && now.Before(c.expires) {
		info.Owner = c.owner
	}
	info.Status = Effective(info.Status, info.Owner != "")
	return info
}

// List implements Store.
func (m *Memory) List(ctx context.Context, f Filter) ([]RunInfo, error) {
	if f.Limit < 0 {
		return nil, invalidf("list runs: negative limit %d", f.Limit)
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	var out []RunInfo
	for _, run := range m.runs {
		info := m.infoLocked(run, now)
		if f.Status != "" && info.Status != f.Status {
			continue
		}
		if f.ConversationID != "" && info.ConversationID != f.ConversationID {
			continue
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b RunInfo) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, runID, owner string, ttl time.Duration) error {
	if err := CheckClaim(runID, owner, ttl); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := time.Now()
	if c, ok := m.claims[runID]; ok && c.owner != owner && now.Before(c.expires) {
		return &ClaimedError{RunID: runID, Owner: c.owner, Expires: c.expires}
	}
	m.claims[runID] = memClaim{owner: owner, expires: now.Add(ttl)}
	return nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, runID, owner string) error {
	if err := CheckRelease(runID, owner); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	c, ok := m.claims[runID]
	if !ok {
		return nil
	}
	if c.owner != owner && time.Now().Before(c.expires) {
		return &ClaimedError{RunID: runID, Owner: c.owner, Expires: c.expires}
	}
	delete(m.claims, runID)
	return nil
}

// History implements Store.
func (m *Memory) History(ctx context.Context, convID string) ([]llm.Message, error) {
	if convID == "" {
		return nil, invalidf("history: empty conversation id")
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	stored := m.convs[convID] // entries are never modified, only appended
	m.mu.Unlock()
	out := make([]llm.Message, len(stored))
	for i, e := range stored {
		msg, err := DecodeMessage(convID, i, e.data)
		if err != nil {
			return nil, err
		}
		out[i] = msg
	}
	return out, nil
}

// AppendConversation implements Store.
func (m *Memory) AppendConversation(ctx context.Context, convID, runID string, msgs []llm.Message) error {
	encoded, err := EncodeConversation(convID, runID, msgs)
	if err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	var prior [][]byte
	for _, e := range m.convs[convID] {
		if e.runID == runID {
			prior = append(prior, e.data)
		}
	}
	if prior != nil {
		if slices.EqualFunc(prior, encoded, bytes.Equal) {
			return nil
		}
		return ConversationConflict(convID, runID)
	}
	for _, b := range encoded {
		m.convs[convID] = append(m.convs[convID], memMessage{runID: runID, data: b})
	}
	return nil
}

// Close implements Store. The memory is dropped.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.runs, m.claims, m.convs = nil, nil, nil
	return nil
}
