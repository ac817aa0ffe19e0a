package openai_test

import (
	"testing"

	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/model/openai"
)

// TestConformance runs the adapter conformance suite against loomtest. The
// round trip's golden request bodies live with the suite, under
// model/modeltest/testdata/golden/openai.
func TestConformance(t *testing.T) {
	modeltest.Run(t, modeltest.Suite{
		Format: loomtest.OpenAI,
		New: func(s modeltest.Setup) model.Model {
			return openai.New(openai.Config{
				APIKey:      "sk-test",
				BaseURL:     s.BaseURL,
				Model:       "gpt-test",
				HTTPClient:  s.HTTPClient,
				IdleTimeout: s.IdleTimeout,
				Timeout:     s.Timeout,

				MaxAnswerBytes: s.MaxAnswerBytes,
				MaxParts:       s.MaxParts,
				MaxToolCalls:   s.MaxToolCalls,
			})
		},
		GoldenDir: "../modeltest/testdata/golden/openai",
	})
}
