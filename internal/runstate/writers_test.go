package runstate_test

import (
	"encoding/json"
	"testing"
)

// What this build writes fits the schemas of format 1: the journals and
// snapshots of the fixture scenarios, written afresh. A writer that adds
// a member, or changes one, fails here until the format (and its
// number) is changed on purpose.
func TestCurrentWritersFitTheSchemas(t *testing.T) {
	for _, s := range scenarios {
		for _, r := range recordScenario(t, s) {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(t, schemaRecord, b); err != nil {
				t.Errorf("%s record %d (%s): %v\n%s", s.name, r.Seq, r.Kind, err, b)
			}
		}
	}
	for name, doc := range agentSnapshots(t) {
		if err := validate(t, schemaAgent, doc); err != nil {
			t.Errorf("agent snapshot %s: %v", name, err)
		}
	}
	for name, r := range machineSnapshots(t) {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(t, schemaSnapshot, b); err != nil {
			t.Errorf("run snapshot %s: %v", name, err)
		}
	}
}
