package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/temporal"
)

func TestStoreSpecs(t *testing.T) {
	for spec, want := range map[string]bool{
		"postgres://u@h/db": true, "postgresql://h/db": true, "/var/lib/loom.db": false, "runs.db": false,
		"postgres:x": false, "host=h dbname=db": false, "": false,
	} {
		if got := isDatabaseURL(spec); got != want {
			t.Errorf("isDatabaseURL(%q) = %v", spec, got)
		}
	}
	if got := displayURL("postgres://loom:s3cret@db.example:5432/loom?sslmode=require"); got != "postgres://loom:xxxxx@db.example:5432/loom?sslmode=require" {
		t.Errorf("displayURL = %q", got)
	}
	if got := displayURL("postgres://loom:s3cret@[::1"); strings.Contains(got, "s3cret") {
		t.Errorf("displayURL of a broken URL = %q", got)
	}
	for id, want := range map[string]string{
		"4242@build-7@loom loom-blobs=local": "build-7",
		"4242@build-7@":                      "build-7",
		"worker-1":                           "",
		"x@build-7@loom":                     "",
	} {
		if got := pollerHost(id); got != want {
			t.Errorf("pollerHost(%q) = %q, want %q", id, got, want)
		}
	}
	if host, _ := os.Hostname(); pollerHost(workerIdentity("q", blobsKindPostgres)) != host {
		t.Errorf("workerIdentity %q does not read back as this host", workerIdentity("q", blobsKindPostgres))
	}
}

// The blobs of --blobs postgres://... behave as package temporal's Blobs
// must: a missing key is temporal.ErrBlobNotFound, a malformed one
// temporal.ErrBlobKey.
func TestPostgresBlobs(t *testing.T) {
	base := os.Getenv("LOOM_POSTGRES_URL")
	if base == "" {
		msg := "LOOM_POSTGRES_URL is not set: run scripts/test, or scripts/install-postgres && export LOOM_POSTGRES_URL=$(scripts/install-postgres start .cache/postgres)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// The CLI uses the schema loom: a database of the test's own.
	name := "loomcli_" + strings.ToLower(rand.Text()[:12])
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	defer c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	u := strings.Replace(base, "/"+cfg.Database+"?", "/"+name+"?", 1)
	if !strings.Contains(u, name) {
		t.Fatalf("cannot make the URL of database %s from %s", name, base)
	}

	b, err := openBlobs(u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if b.kind != blobsKindPostgres || !strings.HasPrefix(b.where, "postgres://") {
		t.Errorf("kind %q, where %q; want postgres and the URL", b.kind, b.where)
	}
	data := []byte("a transcript message")
	key := temporal.BlobKey(data)
	if _, err := b.Get(ctx, key); !errors.Is(err, temporal.ErrBlobNotFound) {
		t.Fatalf("Get of a missing blob: %v, want temporal.ErrBlobNotFound", err)
	}
	for range 2 {
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.Get(ctx, key); err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := b.Put(ctx, "../../etc/passwd", data); !errors.Is(err, temporal.ErrBlobKey) {
		t.Fatalf("Put of a malformed key: %v, want temporal.ErrBlobKey", err)
	}
	if err := b.Put(ctx, temporal.BlobKey([]byte("other")), data); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Put under another data's key: %v, want store.ErrInvalid", err)
	}
	// Another worker's store (another pool) sees it.
	other, err := openBlobs(u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	if got, err := other.Get(ctx, key); err != nil || string(got) != string(data) {
		t.Fatalf("another worker's Get = %q, %v", got, err)
	}
}
