// Package web provides web_fetch, the tool that fetches a public web page
// as text, and the [Fetcher] under it, an HTTP client that cannot be made
// to reach private networks (server-side request forgery).
//
// # What is refused
//
// Before any connection: URLs other than http and https (file:, gopher:,
// ...), URLs with credentials (http://user:pass@host/), localhost and
// *.localhost, ports other than [Config].Ports (80 and 443 by default: not
// 22, not 6379), and literal addresses that are not public, in any
// spelling (127.0.0.1, 2130706433, 0x7f.1, 0177.0.0.1, [::1],
// [::ffff:127.0.0.1]).
//
// At connection: the Fetcher resolves each host itself, checks every
// address, and dials only the checked addresses, by address; the socket's
// final address is checked once more in net.Dialer.Control. A name that
// answers a public address to a first lookup and 127.0.0.1 to the next
// (DNS rebinding) therefore never reaches 127.0.0.1. Refused addresses:
// loopback, private (10/8, 172.16/12, 192.168/16), carrier NAT
// (100.64/10), link-local (169.254/16 with the cloud metadata service,
// fe80::/10), unspecified (0.0.0.0/8, ::), multicast, broadcast and
// reserved ranges, documentation and benchmarking ranges, IPv6 unique
// local (fc00::/7) and site-local addresses, IPv4-mapped and
// IPv4-compatible IPv6, 6to4 and Teredo, and NAT64 (64:ff9b::/96) of a
// refused IPv4 address. [Config].Allow lets exact address:port pairs
// through (a test server, a local documentation site).
//
// Proxies from the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) are
// ignored: a proxy would resolve the name itself and the checks would be
// worthless. Every redirect is checked like the first URL, at most
// [Config].MaxRedirects (5) are followed, and Authorization, Cookie and
// Proxy-Authorization headers never follow one (none is sent anyway).
//
// # Limits
//
// A fetch, with its redirects and its body, gets [Config].Timeout (30 s):
// a server sending a byte a second is cut off. At most [Config].MaxBytes
// (5 MB) of the body is read after decompression, so a gzip bomb
// inflates no further. The tool's result is cut to head and tail beyond
// tool.DefaultMaxResult.
//
// web_fetch needs approval unless [Config].NoApproval is set: what a page
// says can steer the model (prompt injection), and the URL itself can
// carry data out.
package web
