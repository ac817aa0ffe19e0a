package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/loomkit/loom/llm"
)

// WriteJournal writes recs to w as JSON Lines, one record per line, in the
// format ReadJournal reads: the portable form of a journal (export, fixtures).
func WriteJournal(w io.Writer, recs []Record) error {
	bw := bufio.NewWriter(w)
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("store: write journal record %d: %w", r.Seq, err)
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// ReadJournal reads a journal written by WriteJournal. It is strict: an
// unknown member (named, with the version this build reads and the
// record's), a record of another version or an unknown kind
// (*VersionError), or sequences that do not run 1, 2, 3, ... with run_created
// first are refused. Blank lines are skipped. Lines may be up to
// MaxDataSize plus 1 MiB long.
func ReadJournal(r io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxDataSize+1<<20)
	var recs []Record
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, decodeError(line, b, err)
		}
		if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) > 0 {
			return nil, fmt.Errorf("%w: journal line %d: more than one JSON value", ErrInvalid, line)
		}
		if err := llm.CheckMembers(b, &rec); err != nil {
			return nil, fmt.Errorf("%w: journal line %d: %v", ErrInvalid, line, err)
		}
		if err := CheckStored("", rec); err != nil {
			return nil, fmt.Errorf("journal line %d: %w", line, err)
		}
		want := int64(len(recs) + 1)
		if rec.Seq != want {
			return nil, fmt.Errorf("%w: journal line %d: record has sequence %d, want %d (sequences run 1, 2, 3, ... without gaps)", ErrInvalid, line, rec.Seq, want)
		}
		if (rec.Kind == KindRunCreated) != (rec.Seq == 1) {
			return nil, fmt.Errorf("%w: journal line %d: %s must be the first record and only the first", ErrInvalid, line, KindRunCreated)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: journal line %d is longer than %d bytes", ErrInvalid, line+1, MaxDataSize+1<<20)
		}
		return nil, fmt.Errorf("store: read journal: %w", err)
	}
	return recs, nil
}

// decodeError explains why line n, b, is not a record. A member the
// envelope does not have is named with the versions: in a record of
// another version (or none, read as 0, as CheckStored does) it is that
// version's, and the record is refused with a *VersionError; in one that
// says it is of this version it is invalid.
func decodeError(n int, b []byte, err error) error {
	member, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return fmt.Errorf("%w: journal line %d: %v", ErrInvalid, n, err)
	}
	var head struct {
		Seq     int64           `json:"seq"`
		Kind    Kind            `json:"kind"`
		Version json.RawMessage `json:"version"`
	}
	json.Unmarshal(b, &head) // what can be read; Decode said what cannot
	var version int
	if head.Version == nil || json.Unmarshal(head.Version, &version) == nil && version != Version {
		return fmt.Errorf("journal line %d: member %s: %w", n, member, &VersionError{Seq: head.Seq, Kind: head.Kind, Version: version})
	}
	return fmt.Errorf("%w: journal line %d: the record has member %s, which records of version %d, the only version this build of loom reads, do not have (the record says it is version %s): it was written by another program or edited by hand; remove the member",
		ErrInvalid, n, member, Version, head.Version)
}
