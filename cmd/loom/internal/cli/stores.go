package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/postgres"
	"github.com/loomkit/loom/store/sqlite"
	"github.com/loomkit/loom/temporal"
)

// Where runs and blobs are kept:
//
//	--store PATH            a SQLite file (default $XDG_STATE_HOME/loom/loom.db)
//	--store postgres://...  a PostgreSQL database that many machines share
//	loom worker --blobs postgres://...  the Temporal workers' blobs in PostgreSQL
//	loom worker --blobs DIR             ... in a directory (a shared file system)
//
// Without --blobs a worker keeps its blobs in a directory of this machine,
// which only workers of this machine can read; it refuses to start when
// workers of other machines poll its task queue.

// openTimeout bounds connecting to a store and migrating it.
const openTimeout = 30 * time.Second

// isDatabaseURL reports whether spec names a PostgreSQL database rather
// than a file or directory.
func isDatabaseURL(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}

// displayURL is spec with its password, if any, masked.
func displayURL(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return "the PostgreSQL URL given"
	}
	return u.Redacted()
}

// runStore is the run store a command opened, and where it is, for
// messages.
type runStore struct {
	store.Store
	where string
}

// openStore opens the run store --store names: a PostgreSQL database, or a
// SQLite file (by default the one in loom's state directory).
func openStore(spec string) (*runStore, error) {
	if isDatabaseURL(spec) {
		ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
		defer cancel()
		st, err := postgres.Open(ctx, spec, nil)
		if err != nil {
			return nil, usagef("Check the URL, that the server runs and that its user may create tables (the password can come from PGPASSWORD or ~/.pgpass).",
				"cannot open the run store %s: %v", displayURL(spec), err)
		}
		return &runStore{Store: st, where: displayURL(spec)}, nil
	}
	if spec == "" {
		p, err := sqlite.DefaultPath()
		if err != nil {
			return nil, usagef("Give --store PATH.", "cannot find where to keep runs: %v", err)
		}
		spec = p
	}
	st, err := sqlite.Open(spec, nil)
	if err != nil {
		return nil, usagef("Give --store a file in a directory you can write, or a PostgreSQL URL.", "cannot open the run store %s: %v", spec, err)
	}
	return &runStore{Store: st, where: st.Path()}, nil
}

// Kinds of blob store, as a worker advertises its own in its identity.
const (
	blobsKindLocal    = "local"    // the default: a directory of this machine
	blobsKindDir      = "dir"      // --blobs DIR
	blobsKindPostgres = "postgres" // --blobs postgres://...
)

// workerBlobs is the blob store of a worker and what kind it is.
type workerBlobs struct {
	temporal.Blobs
	kind  string
	where string
	close func()
}

// openBlobs opens the blob store --blobs names: a PostgreSQL database, a
// directory, or (spec "") the directory of this machine's loom state.
func openBlobs(spec string) (*workerBlobs, error) {
	if isDatabaseURL(spec) {
		ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
		defer cancel()
		st, err := postgres.Open(ctx, spec, nil)
		if err != nil {
			return nil, usagef("Check the URL, that the server runs and that its user may create tables (the password can come from PGPASSWORD or ~/.pgpass).",
				"cannot open the blob store %s: %v", displayURL(spec), err)
		}
		b := temporal.SharedBlobs(st.Blobs(), postgres.ErrBlobNotFound)
		return &workerBlobs{Blobs: b, kind: blobsKindPostgres, where: displayURL(spec), close: func() { st.Close() }}, nil
	}
	kind := blobsKindDir
	if spec == "" {
		kind = blobsKindLocal
		d, err := blobsDir()
		if err != nil {
			return nil, usagef("Give --blobs DIR or --blobs postgres://...", "cannot find where to keep transcripts: %v", err)
		}
		spec = d
	}
	abs, err := filepath.Abs(spec)
	if err != nil {
		return nil, usagef("", "--blobs %q: %v", spec, err)
	}
	b, err := temporal.NewDirBlobs(abs)
	if err != nil {
		return nil, usagef("Give --blobs a directory you can write, or a PostgreSQL URL.", "cannot use %s for transcripts: %v", abs, err)
	}
	return &workerBlobs{Blobs: b, kind: kind, where: abs, close: func() {}}, nil
}

// workerIdentity is this worker's identity on Temporal: the SDK's usual
// pid@host@queue, and the kind of its blob store, which other workers of
// the queue read (checkBlobsShared).
func workerIdentity(queue, kind string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s@%s loom-blobs=%s", os.Getpid(), host, queue, kind)
}

// pollerHost is the host part of a worker identity of the SDK's form
// (pid@host@queue...), or "" if it has another form.
func pollerHost(identity string) string {
	parts := strings.SplitN(identity, "@", 3)
	if len(parts) < 3 {
		return ""
	}
	if _, err := strconv.Atoi(parts[0]); err != nil {
		return ""
	}
	return parts[1]
}

// pollerFreshness is how recently a poller must have polled to count: a
// live worker polls again at once when a long poll (about a minute) ends.
const pollerFreshness = 2 * time.Minute

// checkBlobsShared asks the server which workers poll queue and refuses,
// with an error that says how to fix it, to let a worker whose blobs stay
// on this machine join workers of other machines: a run moving between
// them would miss its transcript. A worker with a shared store is warned
// about workers of other machines that keep theirs to themselves. If the
// server cannot say, the worker is warned and starts.
func (a *app) checkBlobsShared(ctx context.Context, c client.Client, queue string, b *workerBlobs) error {
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	type poller struct{ identity, kind string }
	var others []poller
	for _, tq := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := c.DescribeTaskQueue(ctx, queue, tq)
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "loom worker: WARNING: cannot list the workers of task queue %q (%v): if workers of other machines poll it, give every worker the same --blobs (postgres://... or a shared directory), or runs moving between them fail\n", queue, err)
			return nil
		}
		for _, p := range resp.GetPollers() {
			id := p.GetIdentity()
			if h := pollerHost(id); h == host || slices.ContainsFunc(others, func(o poller) bool { return o.identity == id }) {
				continue // this machine's workers share its state directory
			}
			if t := p.GetLastAccessTime(); t != nil && time.Since(t.AsTime()) > pollerFreshness {
				continue // gone
			}
			kind := ""
			if _, k, ok := strings.Cut(id, " loom-blobs="); ok {
				kind = k
			}
			others = append(others, poller{id, kind})
		}
	}
	if len(others) == 0 {
		return nil
	}
	names := make([]string, len(others))
	for i, o := range others {
		names[i] = fmt.Sprintf("%q", o.identity)
	}
	if b.kind == blobsKindLocal {
		return usagef("Give every worker of the queue the same --blobs: a PostgreSQL URL (--blobs postgres://user@host/db) or a directory all of them share (--blobs DIR).",
			"task queue %q is polled by workers of other machines (%s), but this worker would keep run transcripts in %s, which they cannot read: a run moving between them would lose its transcript",
			queue, strings.Join(names, ", "), b.where)
	}
	var unshared []string
	for i, o := range others {
		if o.kind == blobsKindLocal {
			unshared = append(unshared, names[i])
		}
	}
	if len(unshared) > 0 {
		fmt.Fprintf(a.env.Stderr, "loom worker: WARNING: workers of other machines on task queue %q keep their blobs to themselves (%s): restart them with the same --blobs as this one (%s), or runs moving between them fail\n",
			queue, strings.Join(unshared, ", "), b.where)
	}
	return nil
}

// The flags' descriptions.
const (
	storeUsage = "where runs are checkpointed: a SQLite file (default: $XDG_STATE_HOME/loom/loom.db), or a PostgreSQL database (postgres://user@host/db) that many machines share"
	blobsUsage = "where the workers of the queue keep run transcripts and tool images: a PostgreSQL database (postgres://user@host/db) or a directory they all share; default: this machine's $XDG_STATE_HOME/loom/temporal-blobs, and then the worker refuses to join workers of other machines"
)
