package modeltest

import (
	"path"
	"testing"

	"github.com/loomkit/loom/model"
)

func TestCorpusExpectationsParse(t *testing.T) {
	kinds := map[model.Kind]bool{
		model.KindTruncatedStream: true, model.KindInvalidResponse: true, model.KindOverloaded: true,
		model.KindServer: true, model.KindRateLimited: true, model.KindTimeout: true,
		// An in-stream error whose numeric code names a 400.
		model.KindBadRequest: true,
	}
	for _, format := range []string{"anthropic", "openai"} {
		dir := path.Join("testdata/streams", format)
		entries, err := corpus.ReadDir(dir)
		if err != nil || len(entries) < 20 {
			t.Fatalf("%s: %d corpus files, %v", format, len(entries), err)
		}
		var ok, failing int
		for _, e := range entries {
			data, err := corpus.ReadFile(path.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			exp, err := parseExpectation(string(data))
			if err != nil {
				t.Errorf("%s/%s: %v", format, e.Name(), err)
				continue
			}
			if exp.kind == "" {
				ok++
			} else if !kinds[exp.kind] {
				t.Errorf("%s/%s: expects kind %q, which no stream can produce", format, e.Name(), exp.kind)
			} else {
				failing++
			}
		}
		if ok == 0 || failing == 0 {
			t.Errorf("%s: %d good and %d failing streams; the corpus needs both", format, ok, failing)
		}
	}
}

func TestParseExpectation(t *testing.T) {
	e, err := parseExpectation(": expect ok text=\"a \\\"b\\\"\" calls=2 finish=tool_calls out=15 incomplete=1 malformed=0 names=\"x({})\"\r\ndata: x\n")
	if err != nil {
		t.Fatal(err)
	}
	if e.kind != "" || *e.text != `a "b"` || *e.calls != 2 || *e.finish != "tool_calls" || *e.out != 15 || *e.incomplete != 1 || *e.malformed != 0 || *e.names != "x({})" {
		t.Fatalf("%+v", e)
	}
	if e, err := parseExpectation("\uFEFF: expect truncated_stream\n"); err != nil || e.kind != model.KindTruncatedStream {
		t.Fatalf("%+v %v", e, err)
	}
	for _, bad := range []string{"data: x\n", ": expect ok calls=x\n", ": expect ok colour=red\n"} {
		if _, err := parseExpectation(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
