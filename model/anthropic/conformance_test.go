package anthropic_test

import (
	"testing"

	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/modeltest"
)

func TestConformance(t *testing.T) {
	modeltest.Run(t, modeltest.Suite{
		Format: loomtest.Anthropic,
		New: func(s modeltest.Setup) model.Model {
			return anthropic.New(anthropic.Config{
				APIKey:      "sk-ant-test",
				BaseURL:     s.BaseURL,
				Model:       "claude-test",
				HTTPClient:  s.HTTPClient,
				IdleTimeout: s.IdleTimeout,
				Timeout:     s.Timeout,

				MaxAnswerBytes: s.MaxAnswerBytes,
				MaxParts:       s.MaxParts,
				MaxToolCalls:   s.MaxToolCalls,
			})
		},
		GoldenDir: "testdata",
	})
}
