package temporal

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// ADVERSARIAL 72: the histories recorded from real runs (testdata/replay,
// written by TestServerRecordHistories) replay without a
// non-determinism error: a change of the workflow's code that would break
// running workflows fails here, before it is deployed.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "replay", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("%d recorded histories in testdata/replay; record them with LOOM_RECORD_HISTORY=1 (see TestServerRecordHistories)", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			RegisterWorkflow(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(quietLogger{}, file); err != nil {
				t.Fatal(err)
			}
		})
	}
}
