package mcp

func runConformanceClient(url string) int { return 1 }
