package web

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// blockedPrefix is a range of addresses web_fetch never connects to.
type blockedPrefix struct {
	prefix netip.Prefix
	what   string
}

func mustPrefixes(pairs ...string) []blockedPrefix {
	out := make([]blockedPrefix, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, blockedPrefix{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// blocked4 and blocked6 are the IANA special-purpose registries (as
// code.dny.dev/ssrf generates them) plus the ranges of cloud metadata and
// carrier NAT: nothing in them is a public web server.
var blocked4 = mustPrefixes(
	"0.0.0.0/8", "the unspecified network (0.0.0.0 reaches this host)",
	"10.0.0.0/8", "a private network",
	"100.64.0.0/10", "carrier-grade NAT (shared address space)",
	"127.0.0.0/8", "loopback (this machine)",
	"169.254.0.0/16", "link-local (includes the cloud metadata service 169.254.169.254)",
	"172.16.0.0/12", "a private network",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation (TEST-NET-1)",
	"192.31.196.0/24", "AS112",
	"192.52.193.0/24", "AMT",
	"192.88.99.0/24", "6to4 relay anycast",
	"192.168.0.0/16", "a private network",
	"192.175.48.0/24", "direct delegation AS112",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation (TEST-NET-2)",
	"203.0.113.0/24", "documentation (TEST-NET-3)",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved (includes broadcast 255.255.255.255)",
)

var blocked6 = mustPrefixes(
	"::/8", "reserved (unspecified ::, loopback ::1, IPv4-mapped and IPv4-compatible addresses)",
	"64:ff9b:1::/48", "local-use NAT64",
	"100::/64", "discard-only",
	"2001::/23", "IETF protocol assignments (includes Teredo and benchmarking)",
	"2001:db8::/32", "documentation",
	"2002::/16", "6to4 (embeds an IPv4 address)",
	"2620:4f:8000::/48", "direct delegation AS112",
	"fc00::/7", "unique local addresses (private IPv6)",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local (deprecated)",
	"ff00::/8", "multicast",
)

// nat64 is the well-known NAT64 prefix: its addresses stand for the IPv4
// address in their last 32 bits, which decides.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// whyBlocked returns why a is not a public address web_fetch may reach, or
// "" when it is.
func whyBlocked(a netip.Addr) string {
	if !a.IsValid() {
		return "not a valid IP address"
	}
	if a.Zone() != "" {
		return "an address with a zone (link-local)"
	}
	if a.Is4In6() {
		if why := whyBlocked(a.Unmap()); why != "" {
			return "IPv4-mapped " + why
		}
		return "an IPv4-mapped IPv6 address"
	}
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if why := whyBlocked(v4); why != "" {
			return "NAT64 for " + v4.String() + ", " + why
		}
		return ""
	}
	list := blocked4
	if a.Is6() {
		list = blocked6
	}
	for _, p := range list {
		if p.prefix.Contains(a) {
			return p.what
		}
	}
	return ""
}

// numericIPv4 parses host the way inet_aton does, which is how browsers
// and the C resolver read hosts such as 2130706433, 0x7f.1 and
// 0177.0.0.1 (all 127.0.0.1). ok is false when host is not made of
// numbers only; err is set when it is, but is not a valid address.
func numericIPv4(host string) (addr netip.Addr, ok bool, err error) {
	host = strings.TrimSuffix(host, ".")
	parts := strings.Split(host, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false, nil
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, isNum := parseNumber(p)
		if !isNum {
			return netip.Addr{}, false, nil
		}
		nums[i] = n
	}
	// a, a.b (b: 24 bits), a.b.c (c: 16 bits), a.b.c.d.
	var v uint64
	last := len(nums) - 1
	for i, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, true, fmt.Errorf("part %d of the numeric host %q is above 255", i+1, host)
		}
		v = v<<8 | n
	}
	bits := uint(8 * (4 - last))
	if nums[last] >= 1<<bits {
		return netip.Addr{}, true, fmt.Errorf("the numeric host %q does not fit in an IPv4 address", host)
	}
	v = v<<bits | nums[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

// parseNumber reads a decimal, octal (leading 0) or hexadecimal (0x)
// number of any size up to 2^32.
func parseNumber(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	digits := s
	switch {
	case len(s) > 1 && (s[:2] == "0x" || s[:2] == "0X"):
		base, digits = 16, s[2:]
		if digits == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		// Digits too large to be an address are still numeric.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 1 << 40, true
		}
		return 0, false
	}
	return min(n, 1<<40), true
}
