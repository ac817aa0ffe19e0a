package temporal

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
)

// Application error types: how failures cross activities, the workflow
// and the client. The model's Kind is part of the type ("loom.model.auth")
// so that Temporal's UI, retry policies and the workflow all see it.
const (
	// ErrorTypeModelPrefix starts the type of a failed model call; the
	// model.Kind follows.
	ErrorTypeModelPrefix = "loom.model."
	// ErrorTypeRunPrefix starts the type of a run the machine failed; the
	// failure follows (max_turns, unknown_tool, stopped, truncated,
	// config).
	ErrorTypeRunPrefix = "loom.run."
	// ErrorTypeTool is a tool's own Go error (its machinery failed).
	ErrorTypeTool = "loom.tool"
	// ErrorTypeInput is an Input the workflow cannot run.
	ErrorTypeInput = "loom.input"
	// ErrorTypeBlobsMissing is an activity that did not find a blob the
	// workflow named.
	ErrorTypeBlobsMissing = "loom.blobs_missing"
	// ErrorTypeRejected is an approval the workflow refused.
	ErrorTypeRejected = "loom.approval_rejected"
	// ErrorTypeInternal is a bug: the workflow and the machine disagree.
	ErrorTypeInternal = "loom.internal"
)

// Sentinels for errors.Is, one per error type of this package.
var (
	// ErrTool matches *ToolError.
	ErrTool = errors.New("temporal: tool failed")
	// ErrInput matches *InputError.
	ErrInput = errors.New("temporal: invalid input")
	// ErrRejected matches *RejectedError.
	ErrRejected = errors.New("temporal: approval rejected")
	// ErrCancelled matches *CancelledError.
	ErrCancelled = errors.New("temporal: run cancelled")
	// ErrStore matches *StoreError.
	ErrStore = errors.New("temporal: blob store lost the run")
)

// ToolError reports a tool whose Call returned a Go error: its machinery
// failed (tool failures the model can act on are results, not errors), and
// the run fails, as it does in-process.
type ToolError struct {
	Name    string // the tool
	CallID  string // the call
	Message string // the error's text
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("temporal: tool %s (call %s) failed: %s; fix the tool or its environment and start the run again", e.Name, e.CallID, e.Message)
}

// Is makes errors.Is(err, ErrTool) match.
func (e *ToolError) Is(target error) bool { return target == ErrTool }

// InputError reports an Input the workflow cannot run: a model or tool name
// the worker's Registry lacks, tool specs given in Run.Tools, a missing
// model name, a malformed image reference (see ImageRefPrefix).
type InputError struct {
	Field  string // the Input field at fault
	Reason string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("temporal: input %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInput) match.
func (e *InputError) Is(target error) bool { return target == ErrInput }

// RejectedError reports approval decisions the workflow refused: no
// approval is pending, a call id is unknown or already decided, a decision
// is malformed. Nothing of the update was applied.
type RejectedError struct {
	Reason string
}

func (e *RejectedError) Error() string {
	return "temporal: approval rejected: " + e.Reason
}

// Is makes errors.Is(err, ErrRejected) match.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// CancelledError is what Handle.Result returns for a cancelled run.
// Response holds the run's messages up to the cancellation, with every
// open tool call answered (by its result if it finished, else by an
// interrupted or not-run result), so it can be the Input of a new run.
type CancelledError struct {
	Response run.Response
	omitted  int // messages left out of the details, fetched by Result
}

func (e *CancelledError) Error() string {
	return fmt.Sprintf("temporal: run cancelled after %d model calls", len(e.Response.Calls))
}

// Is makes errors.Is(err, ErrCancelled) match.
func (e *CancelledError) Is(target error) bool { return target == ErrCancelled }

// StoreError reports a run continued by reference whose messages the blob
// store no longer holds: the workers do not share one durable Blobs.
type StoreError struct {
	Reason string
}

func (e *StoreError) Error() string {
	return "temporal: " + e.Reason + "; give every worker the same durable Registry.Blobs (DirBlobs on one machine), or raise Options.InlineCarryBytes"
}

// Is makes errors.Is(err, ErrStore) match.
func (e *StoreError) Is(target error) bool { return target == ErrStore }

// modelErrorInfo is the part of a *model.Error that crosses Temporal.
// Message is redacted; Raw and the cause stay in the worker.
type modelErrorInfo struct {
	Kind       model.Kind    `json:"kind"`
	Op         string        `json:"op,omitempty"`
	Status     int           `json:"status,omitempty"`
	Type       string        `json:"type,omitempty"`
	Message    string        `json:"message,omitempty"`
	RequestID  string        `json:"request_id,omitempty"`
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	Retryable  bool          `json:"retryable,omitempty"`
}

func (i modelErrorInfo) error() *model.Error {
	e := &model.Error{Kind: i.Kind, Op: i.Op, Status: i.Status, Type: i.Type, Message: i.Message, RequestID: i.RequestID, RetryAfter: i.RetryAfter}
	r := i.Retryable
	e.ShouldRetry = &r
	return e
}

// modelFailure converts an error of Model.Generate into an application
// error whose type carries the Kind: non-retryable for kinds retrying
// cannot fix, with the provider's retry-after as the next delay.
func modelFailure(err error) error {
	var me *model.Error
	if !errors.As(err, &me) {
		me = &model.Error{Kind: model.KindInvalidResponse, Message: err.Error()}
	}
	msg := model.Redact(me.Message)
	if msg == "" && me.Err != nil {
		msg = model.Redact(me.Err.Error())
	}
	info := modelErrorInfo{Kind: me.Kind, Op: me.Op, Status: me.Status, Type: me.Type, Message: msg, RequestID: me.RequestID, RetryAfter: me.RetryAfter, Retryable: me.Retryable()}
	return temporal.NewApplicationErrorWithOptions(model.Redact(me.Error()), ErrorTypeModelPrefix+string(me.Kind), temporal.ApplicationErrorOptions{
		NonRetryable:   !info.Retryable,
		Details:        []any{info},
		NextRetryDelay: me.RetryAfter,
	})
}

// runFailure is a machine failure as it crosses Temporal.
type runFailure struct {
	Type         string           `json:"type"`
	MaxTurns     int              `json:"max_turns,omitempty"`
	Name         string           `json:"name,omitempty"`
	CallID       string           `json:"call_id,omitempty"`
	Allowed      []string         `json:"allowed,omitempty"`
	Field        string           `json:"field,omitempty"`
	FinishReason llm.FinishReason `json:"finish_reason,omitempty"`
	Reason       string           `json:"reason,omitempty"`
}

func encodeRunFailure(err error) runFailure {
	var (
		mt *run.MaxTurnsError
		ut *run.UnknownToolError
		st *run.StoppedError
		tr *run.TruncatedError
		ce *run.ConfigError
	)
	switch {
	case errors.As(err, &mt):
		return runFailure{Type: "max_turns", MaxTurns: mt.MaxTurns}
	case errors.As(err, &ut):
		return runFailure{Type: "unknown_tool", Name: ut.Name, CallID: ut.CallID, Allowed: ut.Allowed, Reason: ut.Reason}
	case errors.As(err, &st):
		return runFailure{Type: "stopped", Reason: st.Reason}
	case errors.As(err, &tr):
		return runFailure{Type: "truncated", FinishReason: tr.FinishReason}
	case errors.As(err, &ce):
		return runFailure{Type: "config", Field: ce.Field, Reason: ce.Reason}
	}
	return runFailure{Type: "stopped", Reason: err.Error()}
}

func (f runFailure) error() error {
	var err error
	switch f.Type {
	case "max_turns":
		err = &run.MaxTurnsError{MaxTurns: f.MaxTurns}
	case "unknown_tool":
		err = &run.UnknownToolError{Name: f.Name, CallID: f.CallID, Allowed: f.Allowed, Reason: f.Reason}
	case "truncated":
		err = &run.TruncatedError{FinishReason: f.FinishReason}
	case "config":
		err = &run.ConfigError{Field: f.Field, Reason: f.Reason}
	default:
		err = &run.StoppedError{Reason: f.Reason}
	}
	return &run.FailedError{Err: err}
}

// toolErrorInfo is a *ToolError as it crosses Temporal.
type toolErrorInfo struct {
	Name    string `json:"name"`
	CallID  string `json:"call_id"`
	Message string `json:"message"`
}

// decodeError turns the error of a workflow (or an update) back into the
// typed error it stands for: *model.Error, *run.FailedError wrapping the
// machine's error, *ToolError, *InputError, *RejectedError, *StoreError,
// *CancelledError. Anything else is returned as it is.
func decodeError(err error) error {
	if err == nil {
		return nil
	}
	var ce *temporal.CanceledError
	if errors.As(err, &ce) {
		var res Result
		if ce.HasDetails() {
			_ = ce.Details(&res)
		}
		return &CancelledError{Response: res.Response, omitted: res.Omitted}
	}
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return err
	}
	t := ae.Type()
	switch {
	case strings.HasPrefix(t, ErrorTypeModelPrefix):
		var info modelErrorInfo
		if !ae.HasDetails() || ae.Details(&info) != nil {
			info = modelErrorInfo{Kind: model.Kind(strings.TrimPrefix(t, ErrorTypeModelPrefix)), Message: ae.Message()}
		}
		return info.error()
	case strings.HasPrefix(t, ErrorTypeRunPrefix):
		var f runFailure
		if !ae.HasDetails() || ae.Details(&f) != nil {
			f = runFailure{Type: strings.TrimPrefix(t, ErrorTypeRunPrefix), Reason: ae.Message()}
		}
		return f.error()
	case t == ErrorTypeTool:
		var info toolErrorInfo
		if ae.HasDetails() && ae.Details(&info) == nil {
			return &ToolError{Name: info.Name, CallID: info.CallID, Message: info.Message}
		}
		return &ToolError{Message: ae.Message()}
	case t == ErrorTypeInput:
		var ie InputError
		if ae.HasDetails() && ae.Details(&ie) == nil {
			return &ie
		}
		return &InputError{Reason: ae.Message()}
	case t == ErrorTypeRejected:
		return &RejectedError{Reason: ae.Message()}
	case t == ErrorTypeBlobsMissing:
		return &StoreError{Reason: ae.Message()}
	}
	return err
}

// appError makes the application error the workflow ends with.
func appError(msg, typ string, details any) error {
	opts := temporal.ApplicationErrorOptions{NonRetryable: true}
	if details != nil {
		opts.Details = []any{details}
	}
	return temporal.NewApplicationErrorWithOptions(msg, typ, opts)
}
