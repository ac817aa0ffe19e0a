package runstate_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The fixtures of format 1. Never edit them: a later loom must read them
// as they are. Add new ones beside them.
var (
	fixtureDir       = filepath.Join("testdata", "format1")
	snapshotFixtures = filepath.Join(fixtureDir, "snapshots")       // run.Run snapshots
	journalFixtures  = filepath.Join(fixtureDir, "journals")        // journals of package agent, as JSON Lines
	agentFixtures    = filepath.Join(fixtureDir, "agent_snapshots") // agent snapshots
	runGoldens       = filepath.Join("..", "..", "run", "testdata")
	storeFixtures    = filepath.Join("..", "..", "store", "testdata", "format1")
)

// files returns the files matching pattern in dir, failing the test when
// there are fewer than min (a fixture directory must not go missing
// silently).
func files(t testing.TB, dir, pattern string, min int) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < min {
		t.Fatalf("%s holds %d files matching %s, want at least %d", dir, len(got), pattern, min)
	}
	return got
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lines returns the non-blank lines of a JSON Lines file.
func lines(t testing.TB, path string) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(read(t, path)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, bytes.Clone(l))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRunGoldensValidate(t *testing.T) {
	for _, f := range files(t, runGoldens, "snapshot_*.json", 8) {
		if err := validate(t, schemaSnapshot, read(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSnapshotFixturesValidate(t *testing.T) {
	for _, f := range files(t, snapshotFixtures, "*.json", 1) {
		if err := validate(t, schemaSnapshot, read(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestJournalFixturesValidate(t *testing.T) {
	for _, f := range files(t, journalFixtures, "*.jsonl", 1) {
		for i, l := range lines(t, f) {
			if err := validate(t, schemaRecord, l); err != nil {
				t.Errorf("%s line %d: %v", f, i+1, err)
			}
		}
	}
}

func TestAgentSnapshotFixturesValidate(t *testing.T) {
	for _, f := range files(t, agentFixtures, "*.json", 1) {
		if err := validate(t, schemaAgent, read(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// The store's own fixtures carry illustrative payloads of no driver, so
// they fit the envelope, not loom's journal format.
func TestStoreFixturesFitTheEnvelope(t *testing.T) {
	for _, f := range files(t, storeFixtures, "*.jsonl", 1) {
		for i, l := range lines(t, f) {
			if err := validate(t, schemaEnvelope, l); err != nil {
				t.Errorf("%s line %d: %v", f, i+1, err)
			}
		}
	}
}
