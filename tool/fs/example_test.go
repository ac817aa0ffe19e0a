package fs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/fs"
)

func Example() {
	dir, _ := os.MkdirTemp("", "workspace")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)

	files, err := fs.New(dir, nil)
	if err != nil {
		panic(err)
	}
	defer files.Close()
	tools, err := tool.NewSet(files.Tools()...)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, call := range []llm.ToolCall{
		{ID: "1", Name: "read_file", Arguments: `{"path":"hello.go","limit":1}`},
		{ID: "2", Name: "edit_file", Arguments: `{"path":"hello.go","old_string":"func main() {}","new_string":"func main() { println(1) }"}`},
		{ID: "3", Name: "read_file", Arguments: `{"path":"../etc/passwd"}`},
	} {
		res, _ := tools.Call(ctx, call)
		fmt.Printf("%s error=%v\n%s\n", call.Name, res.IsError, res.Content)
	}
	fmt.Println(tools.NeedsApproval(llm.ToolCall{Name: "write_file", Arguments: `{"path":".git/hooks/pre-commit","content":"#!/bin/sh"}`}))
	// Output:
	// read_file error=false
	//      1	package main
	//
	// [hello.go continues after line 1; read on with offset=2]
	// edit_file error=false
	// Edited hello.go: replaced 1 occurrence of old_string (the first at line 3).
	// read_file error=true
	// "../etc/passwd" climbs out of the workspace with .., and paths outside the workspace are refused; give a path inside it
	// true
}
