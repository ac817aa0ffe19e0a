package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Version is the record format this package writes and the only one it
// reads. A record of another version was written by a different build of
// loom; it is refused with a *VersionError, never guessed at.
const Version = 1

// MaxDataSize is the largest Record.Data a store accepts (16 MiB). A larger
// payload is a driver bug (a runaway tool result should be truncated before
// it is recorded); it is refused with ErrInvalid.
const MaxDataSize = 16 << 20

// Kind says what a record records. The set is closed: a store refuses kinds
// it does not know, so a journal written by a newer loom is never half read.
type Kind string

// The record kinds, in the order a run usually writes them.
const (
	// KindRunCreated opens every journal, at sequence 1 and nowhere else.
	// Its Data is a JSON object whose top-level members may include those of
	// RunHeader; the store reads them for RunInfo and ignores the rest.
	KindRunCreated Kind = "run_created"
	// KindModelTurn records a committed model response. RunInfo.Turns counts them.
	KindModelTurn Kind = "model_turn"
	// KindToolIntent is written before a tool call starts.
	KindToolIntent Kind = "tool_intent"
	// KindToolResult is written after a tool call ends.
	KindToolResult Kind = "tool_result"
	// KindApprovalRequested records that the run waits for approval decisions.
	KindApprovalRequested Kind = "approval_requested"
	// KindApprovalDecided records the decisions fed to the run.
	KindApprovalDecided Kind = "approval_decided"
	// KindResolution records a decision about an invalid tool call.
	KindResolution Kind = "resolution"
	// KindRunFinished records that the run is done.
	KindRunFinished Kind = "run_finished"
	// KindRunFailed records that the run failed. If its Data is a JSON object
	// with a string member "error", the store shows it in RunInfo.Error.
	KindRunFailed Kind = "run_failed"
	// KindNote is free-form: the store keeps it and changes nothing else.
	KindNote Kind = "note"
)

var knownKinds = map[Kind]bool{
	KindRunCreated: true, KindModelTurn: true, KindToolIntent: true, KindToolResult: true,
	KindApprovalRequested: true, KindApprovalDecided: true, KindResolution: true,
	KindRunFinished: true, KindRunFailed: true, KindNote: true,
}

// Known reports whether k is one of the kinds above.
func (k Kind) Known() bool { return knownKinds[k] }

// Record is one entry of a run's journal. The driver records the inputs it
// fed to the run machine; replaying them in order rebuilds the run.
//
// On Append, Seq may be zero (the store numbers records) or must equal the
// position the record lands at; Version zero means Version; a zero Time
// means the store's clock. Data is opaque to the store except where a Kind's
// doc says otherwise; it must be empty or one JSON value of at most
// MaxDataSize bytes. Records returned by a store own their Data.
type Record struct {
	Seq     int64           `json:"seq"`
	Kind    Kind            `json:"kind"`
	Version int             `json:"version"`
	Time    time.Time       `json:"time"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// NewRecord returns a record of kind k whose Data is v encoded as JSON.
func NewRecord(k Kind, v any) (Record, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Record{}, fmt.Errorf("store: encode %s record: %w", k, err)
	}
	return Record{Kind: k, Data: data}, nil
}

// Decode decodes r.Data into v.
func (r Record) Decode(v any) error {
	if err := json.Unmarshal(r.Data, v); err != nil {
		return fmt.Errorf("store: decode %s record %d: %w", r.Kind, r.Seq, err)
	}
	return nil
}

// RunHeader is what the store reads from a run_created record for RunInfo.
// A driver embeds it in its run_created payload:
//
//	type created struct {
//		store.RunHeader
//		Config json.RawMessage `json:"config"`
//	}
type RunHeader struct {
	Model          string `json:"model,omitempty"`
	Prompt         string `json:"prompt,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	// Meta is the application's own data about the run: any JSON value
	// of at most MaxMeta bytes, kept as given and returned in RunInfo.Meta
	// (a CLI's settings, a user id, labels).
	Meta json.RawMessage `json:"meta,omitempty"`
}

// MaxMeta bounds RunHeader.Meta, in bytes.
const MaxMeta = 64 << 10

// runEnd is what the store reads from a run_failed record.
type runEnd struct {
	Error string `json:"error"`
}

// PrepareAppend checks the arguments of Store.Append and returns the records
// as they are to be stored: numbered from expectedSeq+1, versioned, timed
// (zero times become now, all times UTC) and with Data copied. It does not
// look at the journal; the backend compares expectedSeq with the journal's
// last sequence itself. Backends call it; drivers need not.
func PrepareAppend(runID string, expectedSeq int64, recs []Record, now time.Time) ([]Record, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	if expectedSeq < 0 {
		return nil, invalidf("append to run %q: expected sequence %d is negative (use 0 for a new run)", runID, expectedSeq)
	}
	if len(recs) == 0 {
		return nil, invalidf("append to run %q: no records", runID)
	}
	out := make([]Record, len(recs))
	for i, r := range recs {
		seq := expectedSeq + 1 + int64(i)
		if r.Seq != 0 && r.Seq != seq {
			return nil, invalidf("append to run %q: record %d has sequence %d but would be stored at %d (leave Seq zero)", runID, i, r.Seq, seq)
		}
		if !r.Kind.Known() {
			return nil, invalidf("append to run %q: record %d has unknown kind %q", runID, seq, r.Kind)
		}
		if (r.Kind == KindRunCreated) != (seq == 1) {
			if seq == 1 {
				return nil, invalidf("append to run %q: the first record must be %s, not %s", runID, KindRunCreated, r.Kind)
			}
			return nil, invalidf("append to run %q: %s is only allowed as the first record, not at sequence %d", runID, KindRunCreated, seq)
		}
		if r.Version == 0 {
			r.Version = Version
		}
		if r.Version != Version {
			return nil, &VersionError{RunID: runID, Seq: seq, Kind: r.Kind, Version: r.Version}
		}
		if len(r.Data) > MaxDataSize {
			return nil, invalidf("append to run %q: record %d (%s) holds %d bytes of data, more than the limit of %d: truncate large payloads before recording them", runID, seq, r.Kind, len(r.Data), MaxDataSize)
		}
		if len(r.Data) > 0 && !json.Valid(r.Data) {
			return nil, invalidf("append to run %q: record %d (%s) data is not valid JSON", runID, seq, r.Kind)
		}
		if r.Time.IsZero() {
			r.Time = now
		}
		if r.Time.Before(minTime) || r.Time.After(maxTime) {
			return nil, invalidf("append to run %q: record %d time %v is outside the years 1970 to 2261", runID, seq, r.Time)
		}
		r.Time = r.Time.Round(0).UTC()
		r.Seq = seq
		if len(r.Data) == 0 {
			r.Data = nil
		} else {
			r.Data = bytes.Clone(r.Data)
		}
		out[i] = r
	}
	return out, nil
}

// Times are stored as Unix nanoseconds.
var (
	minTime = time.Unix(0, 0)
	maxTime = time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC)
)

// CheckStored checks a record read back from storage: its kind must be known
// and its version must be Version. Backends call it on every record they
// load, so a journal written by a newer loom is refused, not misread.
func CheckStored(runID string, r Record) error {
	if r.Version != Version {
		return &VersionError{RunID: runID, Seq: r.Seq, Kind: r.Kind, Version: r.Version}
	}
	if !r.Kind.Known() {
		return &VersionError{RunID: runID, Seq: r.Seq, Kind: r.Kind, Version: r.Version, UnknownKind: true}
	}
	return nil
}

func checkRunID(id string) error {
	if id == "" {
		return invalidf("empty run id")
	}
	if len(id) > 256 {
		return invalidf("run id of %d bytes is longer than 256", len(id))
	}
	return nil
}
