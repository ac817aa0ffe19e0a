// Package temporal runs loom agent runs as durable Temporal workflows.
package temporal
