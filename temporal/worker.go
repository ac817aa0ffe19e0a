package temporal

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// WorkerOptions configure NewWorker. The zero value (or nil) polls
// DefaultQueue with the SDK's default worker options.
type WorkerOptions struct {
	// TaskQueue is the queue to poll; empty means DefaultQueue. Runs are
	// started on a queue (client.StartWorkflowOptions.TaskQueue) and every
	// worker of it must have the models and tools the runs name.
	TaskQueue string
	// Worker is passed to worker.New as it is.
	Worker worker.Options
}

// NewWorker returns a worker (not started: call Start or Run on it) that
// runs the workflow and its activities with the models and tools of reg.
// It is what `loom worker --temporal HOST:PORT` runs.
func NewWorker(c client.Client, reg Registry, opts *WorkerOptions) (worker.Worker, error) {
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	if o.TaskQueue == "" {
		o.TaskQueue = DefaultQueue
	}
	acts, err := newActivities(reg)
	if err != nil {
		return nil, err
	}
	w := worker.New(c, o.TaskQueue, o.Worker)
	RegisterWorkflow(w)
	acts.register(w)
	return w, nil
}

// Registrar is where Register puts the workflow and activities: a
// worker.Worker, or the SDK's testsuite.TestWorkflowEnvironment.
type Registrar interface {
	worker.WorkflowRegistry
	worker.ActivityRegistry
}

// Register registers the workflow and the activities bound to reg on r,
// for a worker built by hand (with interceptors, say) or a test
// environment.
func Register(r Registrar, reg Registry) error {
	acts, err := newActivities(reg)
	if err != nil {
		return err
	}
	RegisterWorkflow(r)
	acts.register(r)
	return nil
}

// RegisterWorkflow registers the workflow alone, under WorkflowName: for a
// worker.WorkflowReplayer, or a worker that runs no activities.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
}

func (a *activities) register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Model, activity.RegisterOptions{Name: ActivityModel})
	r.RegisterActivityWithOptions(a.Tool, activity.RegisterOptions{Name: ActivityTool})
	r.RegisterActivityWithOptions(a.Describe, activity.RegisterOptions{Name: ActivityDescribe})
	r.RegisterActivityWithOptions(a.NeedsApproval, activity.RegisterOptions{Name: ActivityApproval})
	r.RegisterActivityWithOptions(a.Load, activity.RegisterOptions{Name: ActivityLoad})
}
