package temporal

import (
	"context"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/loomkit/loom/run"
)

// The memo fields Start sets, for listings.
const (
	MemoModel  = "loom.model"  // Input.Model
	MemoPrompt = "loom.prompt" // the prompt's first line, at most MaxPromptLine bytes
)

// MaxPromptLine bounds the prompt line kept in the memo, in bytes.
const MaxPromptLine = 200

// RunInfo summarizes a run on Temporal for listings.
type RunInfo struct {
	ID string // the workflow id
	// Status is running, done, failed, canceled, terminated or timed_out
	// (the workflow's; a run waiting for approval is running).
	Status  string
	Started time.Time // when its latest execution started (for a run that continued as new, when it continued)
	Closed  time.Time // when it ended; zero while it runs
	Model   string    // from the memo Start sets; "" for runs started otherwise
	Prompt  string    // likewise
}

// List returns the runs on Temporal (workflows of type WorkflowName),
// newest first, at most limit of them (limit <= 0: all). A run that
// continued as new is listed once, as its latest execution. It reads
// Temporal's visibility store, which lags a moment behind a run's start
// and end.
func List(ctx context.Context, c client.Client, limit int) ([]RunInfo, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", WorkflowName)
	var out []RunInfo
	var token []byte
	for {
		page, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: 100})
		if err != nil {
			return nil, fmt.Errorf("temporal: listing runs: %w", err)
		}
		for _, e := range page.GetExecutions() {
			info := RunInfo{
				ID:      e.GetExecution().GetWorkflowId(),
				Status:  statusName(e.GetStatus()),
				Started: e.GetStartTime().AsTime(),
				Model:   memoString(e.GetMemo(), MemoModel),
				Prompt:  memoString(e.GetMemo(), MemoPrompt),
			}
			if e.GetCloseTime() != nil && e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				info.Closed = e.GetCloseTime().AsTime()
			}
			out = append(out, info)
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		token = page.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "done"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

func memoString(m *commonpb.Memo, key string) string {
	p, ok := m.GetFields()[key]
	if !ok {
		return ""
	}
	var s string
	if converter.GetDefaultDataConverter().FromPayload(p, &s) != nil {
		return ""
	}
	return s
}

// promptLine is the first line of a run's prompt (or of its last input
// message when the prompt is empty), at most MaxPromptLine bytes.
func promptLine(cfg run.Config) string {
	p := cfg.Prompt.Text()
	if p == "" && len(cfg.Input) > 0 {
		p = cfg.Input[len(cfg.Input)-1].Text()
	}
	p = strings.TrimSpace(p)
	if i := strings.IndexAny(p, "\r\n"); i >= 0 {
		p = strings.TrimSpace(p[:i])
	}
	if len(p) > MaxPromptLine {
		p = strings.ToValidUTF8(p[:MaxPromptLine], "")
	}
	return p
}
