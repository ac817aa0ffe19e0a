//go:build !unix

package cli

const openNonblock = 0
