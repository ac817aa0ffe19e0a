package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
)

// Store is the checkpoint seam: per-run append-only journals, claims that
// keep two processes off the same run, a listing of runs, and conversation
// histories. Implementations are safe for concurrent use, by goroutines and,
// where the backend is shared (a database file), by processes.
//
// Errors: bad arguments match ErrInvalid, missing runs ErrNotFound, lost
// races ErrConflict or ErrClaimed, unknown formats ErrVersion, use after
// Close ErrClosed; anything else is the backend failing (see the package
// doc for what that means for the records).
type Store interface {
	// Append adds records to the end of run runID's journal, atomically:
	// all or none. expectedSeq is the sequence of the journal's last
	// record as the caller knows it, 0 for a new run (whose first record
	// must then be run_created). If the journal ends elsewhere, Append
	// writes nothing and returns a *ConflictError (ErrConflict), or
	// ErrNotFound when expectedSeq > 0 and the run does not exist. It
	// returns the sequence of the last record written. Append keeps no
	// reference to recs.
	Append(ctx context.Context, runID string, expectedSeq int64, recs ...Record) (lastSeq int64, err error)

	// Load returns the records of run runID with a sequence greater than
	// afterSeq, in order (afterSeq 0 or less: the whole journal). A record of an
	// unknown version or kind fails the whole call with a *VersionError.
	// The caller owns the returned slice.
	Load(ctx context.Context, runID string, afterSeq int64) ([]Record, error)

	// Get returns the summary of one run.
	Get(ctx context.Context, runID string) (RunInfo, error)

	// List returns the runs matching f, newest first (by Created, then by
	// id, descending).
	List(ctx context.Context, f Filter) ([]RunInfo, error)

	// Claim takes or renews owner's claim on run runID for ttl. While the
	// claim is live no other owner can take it: Claim returns a
	// *ClaimedError naming the holder. The run need not exist yet, so a
	// driver can claim a new id before creating the run. A driver renews
	// its claim well before ttl runs out and releases it when it stops.
	//
	// Claims that cross processes are judged by the wall clock, so a clock
	// step can end one early or late; the sequence check of Append still
	// keeps two writers from interleaving when that happens.
	Claim(ctx context.Context, runID, owner string, ttl time.Duration) error

	// Release gives up owner's claim on run runID. Releasing a run nobody
	// claims, or whose claim lapsed, is not an error; releasing another
	// owner's live claim is (*ClaimedError).
	Release(ctx context.Context, runID, owner string) error

	// History returns the messages of conversation convID in the order they
	// were appended; an unknown conversation has none (and no error).
	History(ctx context.Context, convID string) ([]llm.Message, error)

	// AppendConversation adds the messages run runID contributes to
	// conversation convID (its prompt and its new messages), once: a
	// repeated call for the same run and conversation with equal messages
	// does nothing and succeeds, so a driver that crashed after appending
	// may safely append again; with different messages it fails with
	// ErrConflict. msgs must not be empty. It keeps no reference to msgs.
	AppendConversation(ctx context.Context, convID, runID string, msgs []llm.Message) error

	// Close releases the store's resources. Later calls fail with
	// ErrClosed; Close itself may be called more than once.
	Close() error
}

// Status is where a run stands, derived from its journal and claim.
type Status string

const (
	// StatusRunning: the last record is run_created, a model turn, a tool
	// record, a resolution or an approval decision, and some process holds a
	// live claim on the run.
	StatusRunning Status = "running"
	// StatusInterrupted: as running, but nobody holds a live claim: the
	// process driving it stopped without finishing. It can be resumed.
	StatusInterrupted Status = "interrupted"
	// StatusWaitingApproval: the run asked for approval and waits for
	// decisions, which may come from any process at any later time.
	StatusWaitingApproval Status = "waiting_approval"
	// StatusDone: the run finished.
	StatusDone Status = "done"
	// StatusFailed: the run failed.
	StatusFailed Status = "failed"
)

// RunInfo summarizes a run for listings. Stores maintain it as records are
// appended (never by rereading the journal).
type RunInfo struct {
	ID      string
	Status  Status
	Created time.Time // time of the run_created record
	Updated time.Time // time of the last record
	LastSeq int64     // sequence of the last record: the expectedSeq of the next Append
	Turns   int       // number of model_turn records

	Model          string // from the run_created header
	Prompt         string // first line of the header's prompt, at most MaxPromptSummary bytes
	ConversationID string // from the run_created header
	Error          string // from the run_failed record while the run is failed, if it said
	Meta           string // the header's Meta as JSON text, as given ("" when none)

	Owner string // holder of a live claim, or ""
}

// MaxPromptSummary bounds RunInfo.Prompt, in bytes.
const MaxPromptSummary = 200

// Filter selects runs for List. The zero Filter selects all runs.
type Filter struct {
	Status         Status // only runs with this status ("": any)
	ConversationID string // only runs of this conversation ("": any)
	Limit          int    // at most this many runs (0: no limit)
}

// Apply updates info with one record appended to its run: the fold by which
// stores maintain RunInfo. rec must already be checked (by PrepareAppend).
// It returns an error (matching ErrInvalid) when a run_created or run_failed
// record's data does not have the shape documented at its Kind. Owner is not
// touched, and Status is never StatusInterrupted here: that one depends on
// the claim and is decided when the info is read (see Effective).
func (info *RunInfo) Apply(runID string, rec Record) error {
	switch rec.Kind {
	case KindRunCreated:
		var h RunHeader
		if len(rec.Data) > 0 {
			if err := json.Unmarshal(rec.Data, &h); err != nil {
				return invalidf("run %q: run_created data must be a JSON object whose model, prompt and conversation_id members, if present, are strings: %v", runID, err)
			}
			if err := llm.CheckMembers(rec.Data, &h); err != nil {
				return invalidf("run %q: run_created data: %v", runID, err)
			}
		}
		if len(h.Meta) > MaxMeta {
			return invalidf("run %q: run_created meta holds %d bytes, more than the limit of %d", runID, len(h.Meta), MaxMeta)
		}
		if string(h.Meta) == "null" {
			h.Meta = nil
		}
		*info = RunInfo{
			ID:             runID,
			Status:         StatusRunning,
			Created:        rec.Time,
			Model:          h.Model,
			Prompt:         summarizePrompt(h.Prompt),
			ConversationID: h.ConversationID,
			Meta:           string(h.Meta),
		}
	case KindModelTurn:
		info.Turns++
		info.Status = StatusRunning
	case KindToolIntent, KindToolResult, KindResolution, KindApprovalDecided:
		info.Status = StatusRunning
	case KindApprovalRequested:
		info.Status = StatusWaitingApproval
	case KindRunFinished:
		info.Status = StatusDone
	case KindRunFailed:
		var e runEnd
		if len(rec.Data) > 0 && rec.Data[0] == '{' {
			if err := json.Unmarshal(rec.Data, &e); err != nil {
				return invalidf("run %q: run_failed data member \"error\" must be a string: %v", runID, err)
			}
			if err := llm.CheckMembers(rec.Data, &e); err != nil {
				return invalidf("run %q: run_failed data: %v", runID, err)
			}
		}
		info.Status = StatusFailed
		info.Error = e.Error
	case KindNote:
	default:
		return invalidf("run %q: unknown record kind %q", runID, rec.Kind)
	}
	if info.Status != StatusFailed {
		info.Error = ""
	}
	info.LastSeq = rec.Seq
	info.Updated = rec.Time
	return nil
}

// Effective returns the status to show for a run whose journal says stored,
// given whether someone holds a live claim on it: a running run nobody
// drives is interrupted.
func Effective(stored Status, claimed bool) Status {
	if stored == StatusRunning && !claimed {
		return StatusInterrupted
	}
	return stored
}

func summarizePrompt(p string) string {
	p = strings.TrimSpace(p)
	if i := strings.IndexAny(p, "\r\n"); i >= 0 {
		p = strings.TrimSpace(p[:i])
	}
	if len(p) <= MaxPromptSummary {
		return strings.ToValidUTF8(p, "\uFFFD")
	}
	const ellipsis = "…"
	cut := MaxPromptSummary - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return strings.ToValidUTF8(p[:cut], "\uFFFD") + ellipsis
}

// CheckClaim checks the arguments of Store.Claim.
func CheckClaim(runID, owner string, ttl time.Duration) error {
	if err := checkRunID(runID); err != nil {
		return err
	}
	if owner == "" {
		return invalidf("claim run %q: empty owner (use something that names the process, such as host:pid)", runID)
	}
	if ttl <= 0 {
		return invalidf("claim run %q: ttl %v is not positive", runID, ttl)
	}
	return nil
}

// CheckRelease checks the arguments of Store.Release.
func CheckRelease(runID, owner string) error {
	if err := checkRunID(runID); err != nil {
		return err
	}
	if owner == "" {
		return invalidf("release run %q: empty owner", runID)
	}
	return nil
}

// CheckRunID checks a run id given to Load or Get.
func CheckRunID(runID string) error { return checkRunID(runID) }

// EncodeConversation checks the arguments of Store.AppendConversation and
// returns each message encoded as JSON, for backends to store.
func EncodeConversation(convID, runID string, msgs []llm.Message) ([][]byte, error) {
	if convID == "" {
		return nil, invalidf("append to conversation: empty conversation id")
	}
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, invalidf("append to conversation %q from run %q: no messages", convID, runID)
	}
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, invalidf("append to conversation %q from run %q: message %d: %v", convID, runID, i, err)
		}
		out[i] = b
	}
	return out, nil
}

// DecodeMessage decodes a message encoded by EncodeConversation.
func DecodeMessage(convID string, i int, b []byte) (llm.Message, error) {
	var m llm.Message
	if err := json.Unmarshal(b, &m); err != nil {
		return llm.Message{}, fmt.Errorf("%w: conversation %q message %d cannot be read by this build of loom (%v): it may have been written by a newer loom",
			ErrVersion, convID, i, err)
	}
	return m, nil
}

// ConversationConflict returns the error for a repeated AppendConversation
// whose messages differ from those already stored for the run.
func ConversationConflict(convID, runID string) error {
	return fmt.Errorf("%w: conversation %q already holds other messages from run %q: a run's messages are appended once", ErrConflict, convID, runID)
}
