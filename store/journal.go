package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// unknown field, a record of another version or an unknown kind
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
			return nil, fmt.Errorf("%w: journal line %d: %v", ErrInvalid, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: journal line %d: more than one JSON value", ErrInvalid, line)
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
